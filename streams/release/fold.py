"""What the release controller knows, as a fold of ``checkpoints``, ``rewards`` and ``alerts``.
Pure: the service feeds it records, tests feed it lists.

A restarted controller reads the three topics again and folds the same state, so every canary
resumes where the log says it was. The fold keeps what a canary's A/B can need, and no more:

* the registry (``schemas.checkpoints``), each event once;
* each trajectory's A/B contributions (``streams.monitors.windows.reward_contributions``): its
  checkpoint, arm, org and event time decide, when a look is taken, which side of which canary
  it is on, so records read before the canary's own start event (as on a replay) still count;
* each task's rewards by event time, for the covariate: a trajectory's task is its opening
  prompt (the first completion's prompt tokens, within its org), and its covariate is the mean
  reward of the same task before the canary started (CUPED over the task's difficulty: measured
  before the split, so it cannot depend on the arm). A task never seen before is unadjusted;
* critical alerts as they fired.

Everything older than ``horizon_s`` before the newest record is dropped (``prune``).
"""

from __future__ import annotations

import bisect
import hashlib
from array import array
from dataclasses import dataclass, field

from schemas.alerts import AlertEvent
from schemas.checkpoints import CheckpointEvent, Registry
from schemas.rewards import RewardRecord, trajectory_key
from streams.monitors.abreport import ROWS
from streams.monitors.windows import reward_contributions

__all__ = ["CriticalAlert", "ReleaseFold", "Trajectory", "task_key"]

METRICS = tuple(metric for _, metric, _, _ in ROWS)


@dataclass(frozen=True)
class Trajectory:
    record_id: str
    checkpoint_id: str
    arm: str
    org_id: str | None
    ended_s: float  # event time (epoch seconds) it ended, or was finalised
    task: str | None
    values: tuple[float, ...]  # one per METRICS

    @property
    def contributions(self) -> dict[str, tuple[float, float]]:
        return {metric: (1.0, value) for metric, value in zip(METRICS, self.values, strict=True)}

    @property
    def reward(self) -> float:
        return self.values[METRICS.index("reward")]


@dataclass(frozen=True)
class CriticalAlert:
    fingerprint: str
    fired_s: float
    labels: dict[str, str]
    title: str
    summary: str


def task_key(record: RewardRecord) -> str | None:
    """The trajectory's task: its org and the first completion's prompt, hashed; None when it
    has no served completion."""
    if not record.samples:
        return None
    prompt = array("Q", record.samples[0].prompt_token_ids).tobytes()
    digest = hashlib.blake2b(prompt, digest_size=12).hexdigest()
    return f"{record.org_id or ''}|{digest}"


@dataclass
class ReleaseFold:
    horizon_s: float = 2 * 86_400.0  # how far back records are kept
    registry: Registry = field(default_factory=Registry)
    trajectories: dict[str, Trajectory] = field(default_factory=dict)  # by org|trajectory
    history: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # task → (t, r)
    alerts: list[CriticalAlert] = field(default_factory=list)
    newest_s: float = 0.0
    _event_ids: set[str] = field(default_factory=set)

    def add_checkpoint(self, event: CheckpointEvent) -> bool:
        """Fold one registry event; False for one already folded (the controller's own, read
        back)."""
        if event.event_id in self._event_ids:
            return False
        self._event_ids.add(event.event_id)
        self.registry.add(event)
        return True

    def add_reward(self, record: RewardRecord) -> None:
        """Fold a reward record; a trajectory counts once (its first record read, whatever
        the spec version: a re-scored copy must not count twice in an A/B)."""
        record_id = trajectory_key(record.org_id, record.trajectory_id)
        if record_id in self.trajectories:
            return
        ended = record.ended_at or record.finalized_at
        contributions = reward_contributions(record)
        trajectory = Trajectory(record_id, record.checkpoint_id, record.arm, record.org_id,
                                ended.timestamp(), task_key(record),
                                tuple(contributions[m][1] for m in METRICS))
        self.trajectories[record_id] = trajectory
        self.newest_s = max(self.newest_s, trajectory.ended_s)
        if trajectory.task is not None:
            bisect.insort(self.history.setdefault(trajectory.task, []),
                          (trajectory.ended_s, trajectory.reward))

    def add_alert(self, event: AlertEvent) -> None:
        if event.kind != "fired" or event.alert is None or event.alert.severity != "critical":
            return
        alert = event.alert
        self.alerts.append(CriticalAlert(alert.fingerprint, event.occurred_at.timestamp(),
                                         dict(alert.labels), alert.title, alert.summary))

    def covariate(self, task: str | None, start_s: float, lookback_s: float) -> float | None:
        """The task's mean reward in ``[start − lookback, start)``; None when it has none."""
        rows = self.history.get(task) if task is not None else None
        if not rows:
            return None
        low = bisect.bisect_left(rows, (start_s - lookback_s, float("-inf")))
        high = bisect.bisect_left(rows, (start_s, float("-inf")))
        if high <= low:
            return None
        return sum(reward for _, reward in rows[low:high]) / (high - low)

    def since(self, start_s: float) -> list[Trajectory]:
        """Trajectories that ended at or after ``start_s``, in event-time order (so sums over
        them do not depend on the order the topics were read in)."""
        return sorted((t for t in self.trajectories.values() if t.ended_s >= start_s),
                      key=lambda t: (t.ended_s, t.record_id))

    def prune(self) -> None:
        """Forget records and alerts more than ``horizon_s`` older than the newest record."""
        oldest = self.newest_s - self.horizon_s
        self.trajectories = {k: t for k, t in self.trajectories.items() if t.ended_s >= oldest}
        for task in list(self.history):
            rows = self.history[task]
            keep = rows[bisect.bisect_left(rows, (oldest, float("-inf"))):]
            if keep:
                self.history[task] = keep
            else:
                del self.history[task]
        self.alerts = [a for a in self.alerts if a.fired_s >= oldest]

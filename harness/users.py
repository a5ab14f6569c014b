"""Simulated users: seeded reactions to questions and edits, on the simulated clock.

A user keeps an edit when the task's hidden tests pass and reverts it when they fail (each with
a little noise), checks whether kept edits survive at each persistence horizon, sends a
dissatisfied follow-up when the work is wrong or missing, and answers clarifying questions the
way people do: gladly when the request really was ambiguous, impatiently (sometimes giving up)
when it was clear. Every draw comes from a generator seeded by (seed, trajectory, purpose), so a
seed replays the same reactions whatever else ran before.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta

from harness.instrument import Recorder
from harness.tasks.base import Task
from schemas.events import (
    EditDecidedPayload,
    EditDecision,
    EditPersistencePayload,
    FollowupSentPayload,
    Sentiment,
)

__all__ = ["Review", "SimulatedUser", "UserConfig"]


@dataclass(frozen=True)
class UserConfig:
    decision_noise: float = 0.05  # chance a passing edit is rejected / a failing one accepted
    late_revert: float = 0.05  # chance per horizon that a kept, passing edit is undone
    reverts_accepted_failures: float = 0.9  # chance per horizon a kept failing edit is undone
    gives_up_on_needless_question: float = 0.3  # scaled by how clear the request was
    horizons_s: tuple[int, ...] = (600, 3600)
    decision_delay_s: float = 20.0
    followup_delay_s: float = 40.0


@dataclass(frozen=True)
class Review:
    decisions: dict[str, EditDecision]  # edit id -> accepted / rejected / reverted
    surviving: dict[int, float]  # horizon -> fraction of edits still in place
    sentiment: Sentiment


class SimulatedUser:
    def __init__(self, config: UserConfig = UserConfig(), seed: int = 0) -> None:
        self.config = config
        self.seed = seed

    def _rng(self, recorder: Recorder, purpose: str) -> random.Random:
        return random.Random(f"{self.seed}|{recorder.context.trajectory_id}|{purpose}")

    def answer_question(self, task: Task, recorder: Recorder, asked: int = 0) -> str | None:
        """The user's reply to a clarifying question (None: they give up); emits followup.sent."""
        rng = self._rng(recorder, f"question-{asked}")
        if task.ambiguity >= 0.5:
            recorder.emit(FollowupSentPayload(sentiment="neutral"))
            return task.clarification
        recorder.emit(FollowupSentPayload(sentiment="dissatisfied"))
        if rng.random() < self.config.gives_up_on_needless_question * (1 - task.ambiguity):
            return None
        return task.clarification

    def review(self, edit_ids: list[str], passed: bool, recorder: Recorder) -> Review:
        """Decide on each edit, follow up, and check persistence at each horizon."""
        cfg, ended = self.config, recorder.clock.now
        rng = self._rng(recorder, "review")
        decisions: dict[str, EditDecision] = {}
        for edit_id in edit_ids:
            keep = passed != (rng.random() < cfg.decision_noise)
            decisions[edit_id] = "accepted" if keep else ("rejected" if passed else "reverted")
            recorder.emit(EditDecidedPayload(edit_id=edit_id, decision=decisions[edit_id]),
                          at=ended + timedelta(seconds=cfg.decision_delay_s))
        sentiment = self._sentiment(bool(edit_ids) and passed, rng)
        recorder.emit(FollowupSentPayload(sentiment=sentiment),
                      at=ended + timedelta(seconds=cfg.followup_delay_s))
        alive = {e: d == "accepted" for e, d in decisions.items()}
        undo_chance = cfg.late_revert if passed else cfg.reverts_accepted_failures
        surviving: dict[int, float] = {}
        for horizon_s in cfg.horizons_s:
            for edit_id in edit_ids:
                alive[edit_id] = alive[edit_id] and rng.random() >= undo_chance
                recorder.emit(EditPersistencePayload(
                    edit_id=edit_id, horizon_s=horizon_s,
                    surviving_fraction=1.0 if alive[edit_id] else 0.0),
                    at=ended + timedelta(seconds=horizon_s))
            surviving[horizon_s] = sum(alive.values()) / len(alive) if alive else 0.0
        return Review(decisions, surviving, sentiment)

    def _sentiment(self, success: bool, rng: random.Random) -> Sentiment:
        if rng.random() < self.config.decision_noise:
            return "neutral"
        return "satisfied" if success else "dissatisfied"

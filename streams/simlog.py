"""A seeded, pure generator of an ``events.raw`` log with the mess production has.

Trajectories start a few seconds apart; each has turns of completions, tool calls (some broken),
edits that are accepted, rejected or later reverted, clarifying questions, follow-ups, an end
event (completed, aborted, error, or never sent) and persistence checks at the horizons. Events
reach the log out of order (bounded transport delay), some twice, some persistence checks never,
and a few hours late. The result is the log in arrival order: (key, value) pairs as ingest would
produce them. Same arguments, same bytes.
"""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from schemas.events import (
    COMPLETION_SERVED,
    EDIT_PERSISTENCE,
    GATEWAY_PRODUCER,
    TOOL_CALLED,
    TRAJECTORY_ENDED,
    ClarificationAsked,
    ClarificationAskedPayload,
    CompletionServed,
    CompletionServedPayload,
    EditDecided,
    EditDecidedPayload,
    EditPersistence,
    EditPersistencePayload,
    EditProposed,
    EditProposedPayload,
    Event,
    FollowupSent,
    FollowupSentPayload,
    ToolCalled,
    ToolCalledPayload,
    TrajectoryEnded,
    TrajectoryEndedPayload,
)

__all__ = ["SimConfig", "poison_log", "simulate_log"]

SIM_START = datetime(2025, 6, 1, tzinfo=UTC)
_FINISHES: list[Literal["stop", "length", "error"]] = ["stop", "length", "error"]
_SENTIMENTS: list[Literal["dissatisfied", "neutral", "satisfied"]] = [
    "dissatisfied", "neutral", "satisfied"]
_DECISIONS: list[Literal["accepted", "rejected"]] = ["accepted", "rejected"]
_OUTCOMES: list[Literal["completed", "aborted", "error"]] = ["completed", "aborted", "error"]


@dataclass(frozen=True)
class SimConfig:
    horizons_s: tuple[int, ...] = (600, 3600)
    mean_start_gap_s: float = 2.0
    max_transport_delay_s: float = 30.0
    duplicate_p: float = 0.02
    late_p: float = 0.01  # a persistence check that arrives hours after its horizon
    late_delay_s: float = 3 * 3600.0
    missing_check_p: float = 0.05
    broken_call_p: float = 0.12
    no_end_p: float = 0.03
    arms: tuple[str, ...] = ("control", "candidate")
    # Completions carry text (a prompt from a few tasks, so tasks repeat across trajectories,
    # and a good or a poor reply) and the tools offered; a poor reply breaks calls and has its
    # edits rejected and its user dissatisfied far more often.
    texts: bool = False


# (prompt, its token ids) of the tasks, and the replies; used when SimConfig.texts is set.
_TASKS = [(f"user: {request}", [11 + i, 40 + i, 90 + 3 * i, 7]) for i, request in enumerate((
    "Fix the failing test in src/app.py.", "Add a --verbose flag to the CLI.",
    "Rename the helper parse_row to read_row.", "Why does the build fail on Windows?"))]
_GOOD_REPLIES = ("I read the test, fixed the off-by-one in the loop and ran the tests: they "
                 "pass.", "Done: the change is small and the tests pass.")
_POOR_REPLIES = ("I rewrote the whole module and deleted the failing test.",
                 "<tool>edit_file {broken json</tool>")


def _uuid7(rng: random.Random, unix_ms: int) -> uuid.UUID:
    # RFC 9562 layout, with the random bits drawn from the seeded generator.
    value = unix_ms << 80 | 0x7 << 76 | rng.getrandbits(12) << 64 | 0b10 << 62 | rng.getrandbits(62)
    return uuid.UUID(int=value)


class _Trajectory:
    """Builds one trajectory's events as (event time, event) pairs."""

    def __init__(self, rng: random.Random, config: SimConfig, index: int, start: datetime) -> None:
        self.rng, self.config = rng, config
        self.turns = rng.randint(1, 3)
        self.tid = f"traj-{index:06d}"
        self.common = {
            "trajectory_id": self.tid, "session_id": f"sess-{index // 3:06d}",
            "user": f"user-{rng.randrange(200):03d}", "org_id": f"org-{rng.randrange(5)}",
            "checkpoint_id": f"ckpt-{rng.randrange(2)}", "arm": rng.choice(config.arms),
        }
        self.clock = start
        self.events: list[tuple[datetime, Event]] = []
        self.good: bool | None = None  # the current reply's quality, when texts are made

    def emit(self, model: type[Any], payload: Any, at: datetime | None = None) -> None:
        when = at or self.clock
        ms = int(when.timestamp() * 1000)
        # Completions come from the gateway, everything else from a client through ingest.
        producer = GATEWAY_PRODUCER if model is CompletionServed else "ingest:sim"
        self.events.append((when, model(
            event_id=_uuid7(self.rng, ms), occurred_at=when, sent_at=when, received_at=when,
            event_time=when, clock_skew_ms=0, payload=payload, producer=producer,
            **self.common)))

    def tick(self, low_s: float, high_s: float) -> None:
        self.clock += timedelta(seconds=self.rng.uniform(low_s, high_s))

    def _text(self) -> dict[str, Any]:
        """The text fields of a completion, and whether its reply is a good one."""
        rng = self.rng
        prompt, prompt_ids = _TASKS[rng.randrange(len(_TASKS))]
        self.good = rng.random() < 0.5
        reply = rng.choice(_GOOD_REPLIES if self.good else _POOR_REPLIES)
        return {"prompt_text": prompt, "completion_text": reply, "prompt_token_ids": prompt_ids,
                "tools_offered": ["read", "grep", "edit"]}

    def turn(self, number: int) -> None:
        rng = self.rng
        n_tokens = rng.randint(2, 12)
        text = self._text() if self.config.texts else {}
        self.emit(CompletionServed, CompletionServedPayload(
            completion_id=f"{self.tid}-c{number}", model="sim",
            prompt_token_ids=text.pop("prompt_token_ids", None) or [
                rng.randrange(1000) for _ in range(rng.randint(4, 16))],
            completion_token_ids=[rng.randrange(1000) for _ in range(n_tokens)],
            behaviour_logprobs=[-round(rng.uniform(0.01, 4.0), 4) for _ in range(n_tokens)],
            ttft_ms=round(rng.uniform(50, 400), 1), latency_ms=round(rng.uniform(300, 6000), 1),
            finish_reason=rng.choices(_FINISHES, [0.9, 0.08, 0.02])[0], **text))
        for call in range(rng.randint(0, 3)):
            self.tick(0.1, 3)
            broken = rng.random() < (self.config.broken_call_p if self.good is None
                                     else 0.0 if self.good else 0.6)
            self.emit(ToolCalled, ToolCalledPayload(
                call_id=f"{self.tid}-t{number}-{call}", tool=rng.choice(["read", "grep", "edit"]),
                valid=not broken, error_kind="malformed_call" if broken else None))
        self.tick(0.5, 5)
        if rng.random() < 0.12:
            ambiguity = rng.choice([None, round(rng.random(), 2)])
            self.emit(ClarificationAsked, ClarificationAskedPayload(request_ambiguity=ambiguity))
        elif rng.random() < 0.7:
            self.edit(f"{self.tid}-e{number}")
        if rng.random() < 0.3:
            self.tick(1, 20)
            weights = [0.3, 0.4, 0.3] if self.good is None else (
                [0.05, 0.4, 0.55] if self.good else [0.8, 0.2, 0.0])
            sentiment = rng.choices(_SENTIMENTS, weights)[0]
            self.emit(FollowupSent, FollowupSentPayload(sentiment=sentiment))

    def edit(self, edit_id: str) -> None:
        rng = self.rng
        self.emit(EditProposed, EditProposedPayload(edit_id=edit_id,
                                                    path=f"src/m{rng.randrange(9)}.py",
                                                    lines_added=rng.randrange(30)))
        self.tick(1, 30)
        weights = [0.7, 0.3] if self.good is None else ([0.95, 0.05] if self.good else [0.1, 0.9])
        decision = rng.choices(_DECISIONS, weights)[0]
        self.emit(EditDecided, EditDecidedPayload(edit_id=edit_id, decision=decision))
        if decision != "accepted":
            return
        decided = self.clock
        if rng.random() < 0.05:
            self.emit(EditDecided, EditDecidedPayload(edit_id=edit_id, decision="reverted"),
                      at=decided + timedelta(seconds=rng.uniform(10, 60)))
        for horizon in self.config.horizons_s:
            if rng.random() >= self.config.missing_check_p:
                self.emit(EditPersistence, EditPersistencePayload(
                    edit_id=edit_id, horizon_s=horizon,
                    surviving_fraction=rng.choice([0.0, 0.5, 1.0, 1.0, 1.0])),
                    at=decided + timedelta(seconds=horizon))

    def end(self) -> None:
        if self.rng.random() < self.config.no_end_p:
            return
        outcome = self.rng.choices(_OUTCOMES, [0.86, 0.09, 0.05])[0]
        self.tick(0.5, 3)
        self.emit(TrajectoryEnded, TrajectoryEndedPayload(
            outcome=outcome, turns=self.turns, task_family=self.rng.choice(["fix", "feature"])))


def _trajectory(rng: random.Random, config: SimConfig, index: int,
                start: datetime) -> list[tuple[datetime, Event]]:
    trajectory = _Trajectory(rng, config, index, start)
    for number in range(trajectory.turns):
        trajectory.turn(number)
        trajectory.tick(2, 40)
    trajectory.end()
    return trajectory.events


def _arrival(rng: random.Random, config: SimConfig, when: datetime, event: Event) -> datetime:
    delay_s = min(rng.expovariate(1 / 2.0), config.max_transport_delay_s)
    if event.type == EDIT_PERSISTENCE and rng.random() < config.late_p:
        delay_s += config.late_delay_s
    return when + timedelta(seconds=delay_s)


def simulate_log(
    trajectories: int, seed: int = 0, config: SimConfig = SimConfig()
) -> list[tuple[bytes, bytes]]:
    """``trajectories`` trajectories as a log in arrival order of (key, JSON value) pairs."""
    rng = random.Random(seed)
    arrivals: list[tuple[datetime, int, Event]] = []
    start = SIM_START
    for index in range(trajectories):
        start += timedelta(seconds=rng.expovariate(1 / config.mean_start_gap_s))
        for when, event in _trajectory(rng, config, index, start):
            copies = 2 if rng.random() < config.duplicate_p else 1
            for _ in range(copies):
                arrivals.append((_arrival(rng, config, when, event), len(arrivals), event))
    arrivals.sort(key=lambda item: (item[0], item[1]))
    return [(event.trajectory_id.encode(), event.model_dump_json().encode())
            for _, _, event in arrivals]


# Records that are not usable events, each of a kind a consumer must survive: (name, make) where
# make turns a real event of the log (as a dict) into the poison's bytes.
def _with(event: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**event, **changes}


_POISON: tuple[tuple[str, Any], ...] = (
    ("not json", lambda e: b"\xff\xfe this is not JSON {"),
    ("json, not an event", lambda e: b'{"hello": "world"}'),
    ("empty", lambda e: b""),
    ("nested 100,000 deep", lambda e: b"[" * 100_000 + b"]" * 100_000),
    ("non-finite latency", lambda e: json.dumps(_with(e, type=COMPLETION_SERVED, payload={
        "completion_id": "c-poison", "model": "sim", "prompt_token_ids": [1],
        "completion_token_ids": [2], "behaviour_logprobs": [-0.1], "ttft_ms": 1.0,
        "latency_ms": 1.0})).encode().replace(b'"latency_ms": 1.0', b'"latency_ms": 1e999')),
    ("400-digit turns", lambda e: json.dumps(_with(e, type=TRAJECTORY_ENDED, payload={
        "outcome": "aborted", "turns": int("9" * 400)})).encode()),
    ("no org (not from ingest)", lambda e: json.dumps(
        {k: v for k, v in e.items() if k != "org_id"}).encode()),
    ("an org id ingest never stamps", lambda e: json.dumps(_with(e, org_id="../etc")).encode()),
    ("wrong type", lambda e: json.dumps(_with(e, type=TOOL_CALLED, payload={
        "call_id": "k", "tool": "lint", "valid": "yes"})).encode()),
)


def poison_log(
    log: list[tuple[bytes, bytes]], seed: int = 0,
) -> tuple[list[tuple[bytes, bytes]], dict[int, str]]:
    """``log`` with one record of each poison kind inserted at random places, keyed like the
    event it was made from (so it lands in that trajectory's partition); returns the new log
    and, per index of a poison record in it, the poison's kind."""
    rng = random.Random(seed)
    out = list(log)
    kinds: list[tuple[int, str]] = []
    for kind, make in _POISON:
        key, value = log[rng.randrange(len(log))]
        event = json.loads(value)
        event["event_id"] = str(_uuid7(rng, 1_750_000_000_000))
        index = rng.randrange(len(out) + 1)
        out.insert(index, (key, make(event)))
        kinds = [(i + 1 if i >= index else i, k) for i, k in kinds] + [(index, kind)]
    return out, dict(kinds)

"""The per-trajectory fold: facts in, one mutable state per trajectory, updated in place.

A trajectory is identified by its organisation and its id (``Fact.key``). Its state is the set
of its facts keyed by event id, so folding is idempotent (a duplicate event is a no-op) and
commutative (arrival order never matters), plus what completeness and the deadline need, kept
up to date as facts arrive: the latest event time, the first end event, the edits proposed,
each edit's latest decision and the persistence checks seen. Nothing is copied per event and
nothing is sorted until the record is made. Everything derived for the record sorts facts by
(event time, event id) first. Nothing here reads a clock.
"""

from __future__ import annotations

from collections.abc import Iterable

from schemas.events import EDIT_DECIDED, EDIT_PERSISTENCE, EDIT_PROPOSED, TRAJECTORY_ENDED
from streams.facts import Fact
from streams.spec import RewardSpec

__all__ = [
    "COMPLETENESS_TYPES",
    "Trajectory",
    "deadline_ms",
    "edit_decisions",
    "ended_fact",
    "fold",
    "fold_all",
    "is_complete",
    "ordered_facts",
]

# Only these event types can make a trajectory complete; the others never change the answer.
COMPLETENESS_TYPES = frozenset({TRAJECTORY_ENDED, EDIT_PROPOSED, EDIT_DECIDED, EDIT_PERSISTENCE})


def _order(fact: Fact) -> tuple[int, str]:
    return fact.time_ms, fact.event_id


class Trajectory:
    """The facts of one trajectory and what is derived from them as they arrive."""

    __slots__ = ("checked", "decided", "ended", "facts", "key", "last_time_ms", "org_id",
                 "partition", "proposed", "trajectory_id")

    def __init__(self, org_id: str, trajectory_id: str, key: str, partition: int) -> None:
        self.org_id = org_id
        self.trajectory_id = trajectory_id
        self.key = key
        self.partition = partition
        self.facts: dict[str, Fact] = {}
        self.last_time_ms = -(1 << 62)
        self.ended: Fact | None = None  # the first trajectory.ended (a client may send two)
        self.proposed: set[str] = set()
        self.decided: dict[str, Fact] = {}  # edit → its latest edit.decided
        self.checked: set[tuple[str, int]] = set()  # (edit, horizon) persistence checks

    def _derive(self, fact: Fact) -> None:
        if fact.time_ms > self.last_time_ms:
            self.last_time_ms = fact.time_ms
        kind = fact.type
        if kind == TRAJECTORY_ENDED:
            if self.ended is None or _order(fact) < _order(self.ended):
                self.ended = fact
        elif kind == EDIT_PROPOSED:
            self.proposed.add(fact.data["edit"])
        elif kind == EDIT_DECIDED:
            edit = fact.data["edit"]
            current = self.decided.get(edit)
            if current is None or _order(current) < _order(fact):
                self.decided[edit] = fact
        elif kind == EDIT_PERSISTENCE:
            self.checked.add((fact.data["edit"], fact.data["horizon_s"]))

    def _rederive(self) -> None:
        self.last_time_ms, self.ended = -(1 << 62), None
        self.proposed, self.decided, self.checked = set(), {}, set()
        for fact in self.facts.values():
            self._derive(fact)


def fold(state: Trajectory, fact: Fact) -> bool:
    """Add ``fact`` to ``state`` in place; False when it changes nothing. A duplicate event id
    keeps its first place in the log (the lowest offset)."""
    current = state.facts.get(fact.event_id)
    if current is None:
        state.facts[fact.event_id] = fact
        state._derive(fact)
        return True
    if (current.offset, current.time_ms) <= (fact.offset, fact.time_ms):
        return False
    # Only an unordered fold (tests, restores) meets the earlier copy second.
    state.facts[fact.event_id] = fact
    state._rederive()
    return True


def fold_all(facts: Iterable[Fact], partition: int = 0) -> Trajectory:
    """The state of one trajectory's facts (at least one)."""
    state: Trajectory | None = None
    for fact in facts:
        if state is None:
            state = Trajectory(fact.org_id, fact.trajectory_id, fact.key, partition)
        fold(state, fact)
    if state is None:
        raise ValueError("a trajectory needs at least one fact")
    return state


def ordered_facts(state: Trajectory) -> list[Fact]:
    return sorted(state.facts.values(), key=_order)


def ended_fact(facts: list[Fact]) -> Fact | None:
    """The first ``trajectory.ended`` of ordered facts (a client may send two)."""
    return next((fact for fact in facts if fact.type == TRAJECTORY_ENDED), None)


def edit_decisions(facts: list[Fact]) -> dict[str, str | None]:
    """Each edit the trajectory knows of and its latest decision (None while undecided)."""
    decisions: dict[str, str | None] = {}
    for fact in facts:
        if fact.type == EDIT_PROPOSED:
            decisions.setdefault(fact.data["edit"], None)
        elif fact.type == EDIT_DECIDED:
            decisions[fact.data["edit"]] = fact.data["decision"]
    return decisions


def is_complete(state: Trajectory, spec: RewardSpec) -> bool:
    """Every expected signal is in: the end, a decision on every edit, and a persistence check
    at every horizon of the spec for every accepted edit."""
    if state.ended is None:
        return False
    decided = state.decided
    if any(edit not in decided for edit in state.proposed):
        return False
    checked = state.checked
    return all(
        (edit, horizon) in checked
        for edit, fact in decided.items() if fact.data["decision"] == "accepted"
        for horizon in spec.horizons_s
    )


def deadline_ms(state: Trajectory, spec: RewardSpec) -> int:
    """Event time after which the trajectory is final whatever is missing."""
    wait_s = spec.max_horizon_s + spec.finalise.grace_s
    if state.ended is not None:
        return state.ended.time_ms + wait_s * 1000
    return state.last_time_ms + (wait_s + spec.finalise.idle_timeout_s) * 1000

"""The per-trajectory fold: facts in, a state out; completeness and deadline from the state.

The state is a set of facts keyed by event id, so folding is idempotent (a duplicate event is a
no-op) and commutative (arrival order never matters). Everything derived from it sorts facts by
(event time, event id) first. Nothing here reads a clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from streams.facts import Fact
from streams.spec import RewardSpec

__all__ = [
    "TrajectoryState",
    "deadline_ms",
    "edit_decisions",
    "ended_fact",
    "fold",
    "fold_all",
    "is_complete",
    "ordered_facts",
]


@dataclass(frozen=True, slots=True)
class TrajectoryState:
    trajectory_id: str
    partition: int
    facts: Mapping[str, Fact] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def last_time_ms(self) -> int:
        return max(fact.time_ms for fact in self.facts.values())

    def until_offset(self, offset: int) -> TrajectoryState:
        """The state as it was once every event up to ``offset`` was folded."""
        kept = {key: fact for key, fact in self.facts.items() if fact.offset <= offset}
        return TrajectoryState(self.trajectory_id, self.partition, MappingProxyType(kept))


def _earlier(a: Fact, b: Fact) -> Fact:
    return a if (a.offset, a.time_ms) <= (b.offset, b.time_ms) else b


def fold(state: TrajectoryState, fact: Fact) -> TrajectoryState:
    """The state with ``fact`` added; a duplicate event id keeps its first place in the log."""
    current = state.facts.get(fact.event_id)
    chosen = fact if current is None else _earlier(current, fact)
    if chosen is current:
        return state
    facts = dict(state.facts)
    facts[fact.event_id] = chosen
    return TrajectoryState(state.trajectory_id, state.partition, MappingProxyType(facts))


def fold_all(trajectory_id: str, partition: int, facts: Iterable[Fact]) -> TrajectoryState:
    state = TrajectoryState(trajectory_id, partition)
    for fact in facts:
        state = fold(state, fact)
    return state


def ordered_facts(state: TrajectoryState) -> list[Fact]:
    return sorted(state.facts.values(), key=lambda fact: (fact.time_ms, fact.event_id))


def ended_fact(facts: list[Fact]) -> Fact | None:
    """The first ``trajectory.ended`` of ordered facts (a client may send two)."""
    return next((fact for fact in facts if fact.type == "trajectory.ended"), None)


def edit_decisions(facts: list[Fact]) -> dict[str, str | None]:
    """Each edit the trajectory knows of and its latest decision (None while undecided)."""
    decisions: dict[str, str | None] = {}
    for fact in facts:
        if fact.type == "edit.proposed":
            decisions.setdefault(fact.data["edit"], None)
        elif fact.type == "edit.decided":
            decisions[fact.data["edit"]] = fact.data["decision"]
    return decisions


def is_complete(state: TrajectoryState, spec: RewardSpec) -> bool:
    """Every expected signal is in: the end, a decision on every edit, and a persistence check
    at every horizon of the spec for every accepted edit."""
    facts = ordered_facts(state)
    if ended_fact(facts) is None:
        return False
    decisions = edit_decisions(facts)
    if any(decision is None for decision in decisions.values()):
        return False
    checked = {(f.data["edit"], f.data["horizon_s"]) for f in facts if f.type == "edit.persistence"}
    return all(
        (edit, horizon) in checked
        for edit, decision in decisions.items() if decision == "accepted"
        for horizon in spec.horizons_s
    )


def deadline_ms(state: TrajectoryState, spec: RewardSpec) -> int:
    """Event time after which the trajectory is final whatever is missing."""
    wait_s = spec.max_horizon_s + spec.finalise.grace_s
    ended = ended_fact(ordered_facts(state))
    if ended is not None:
        return ended.time_ms + wait_s * 1000
    return state.last_time_ms + (wait_s + spec.finalise.idle_timeout_s) * 1000

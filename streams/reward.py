"""From a final trajectory state to its reward record: signals, weighted components, total.

Signals are raw measurements (counts, fractions, milliseconds); each component is one weight of
the spec times one signal, so a record shows exactly why it scored what it did. Failures are
scored, never skipped: broken tool calls, aborted, errored and unfinished trajectories all carry
their negative terms.
"""

from __future__ import annotations

from typing import Any, Literal

from schemas.events import (
    CLARIFICATION_ASKED,
    COMPLETION_SERVED,
    EDIT_PERSISTENCE,
    FOLLOWUP_SENT,
    TOOL_CALLED,
)
from schemas.rewards import Component, RewardRecord, Signal
from streams.facts import Fact, ms_to_datetime
from streams.fold import Trajectory, edit_decisions, ended_fact, ordered_facts
from streams.spec import RewardSpec

__all__ = ["FinalisedBy", "components", "reward_record", "signals"]

FinalisedBy = Literal["complete", "watermark"]
Outcome = Literal["completed", "aborted", "error", "unfinished"]


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _kept_fractions(facts: list[Fact], spec: RewardSpec) -> dict[int, float]:
    """Share of proposed edits surviving at each horizon. Rejected and reverted edits count as
    not kept; an accepted edit whose check is missing carries its last earlier check forward,
    and without any check it is left out (telemetry loss is not the policy's doing)."""
    decisions = edit_decisions(facts)
    checks: dict[str, dict[int, float]] = {}
    for fact in facts:
        if fact.type == EDIT_PERSISTENCE:
            checks.setdefault(fact.data["edit"], {}).setdefault(
                fact.data["horizon_s"], fact.data["fraction"])
    kept: dict[int, float] = {}
    for horizon in spec.horizons_s:
        total, counted = 0.0, 0
        for edit, decision in decisions.items():
            if decision != "accepted":
                counted += 1
                continue
            known = [h for h in checks.get(edit, {}) if h <= horizon]
            if known:
                total += checks[edit][max(known)]
                counted += 1
        kept[horizon] = total / counted if counted else 0.0
    return kept


def _unambiguous(fact: Fact, spec: RewardSpec) -> bool:
    ambiguity = fact.data["ambiguity"]
    if ambiguity is None:
        return spec.clarification.unknown_is_unambiguous
    return ambiguity < spec.clarification.unambiguous_below


def signals(facts: list[Fact], spec: RewardSpec) -> dict[str, float]:
    """Raw measurements of ordered facts; the monitors read these too."""
    by_type: dict[str, list[Fact]] = {}
    for fact in facts:
        by_type.setdefault(fact.type, []).append(fact)
    completions = by_type.get(COMPLETION_SERVED, [])
    tools = by_type.get(TOOL_CALLED, [])
    questions = by_type.get(CLARIFICATION_ASKED, [])
    followups = by_type.get(FOLLOWUP_SENT, [])
    by_edit = edit_decisions(facts)
    decisions = list(by_edit.values())
    ended = ended_fact(facts)
    kept = _kept_fractions(facts, spec)
    checked = {(f.data["edit"], f.data["horizon_s"]) for f in by_type.get(EDIT_PERSISTENCE, [])}
    expected = {(edit, h) for edit, decision in by_edit.items() if decision == "accepted"
                for h in spec.horizons_s}
    values: dict[str, float] = {
        Signal.COMPLETIONS: len(completions),
        Signal.COMPLETIONS_FAILED: sum(f.data["finish"] in ("abort", "error")
                                       for f in completions),
        Signal.EDITS_PROPOSED: len(decisions),
        Signal.EDITS_ACCEPTED: decisions.count("accepted"),
        Signal.EDITS_REJECTED: decisions.count("rejected"),
        Signal.EDITS_REVERTED: decisions.count("reverted"),
        Signal.EDITS_UNDECIDED: decisions.count(None),
        Signal.KEPT_FRACTION: kept[spec.max_horizon_s],
        Signal.PERSISTENCE_CHECKS: len(checked),
        Signal.PERSISTENCE_MISSING: len(expected - checked),
        Signal.TOOL_CALLS: len(tools),
        Signal.BROKEN_TOOL_CALLS: sum(not f.data["valid"] for f in tools),
        Signal.CLARIFICATIONS: len(questions),
        Signal.CLARIFICATIONS_UNAMBIGUOUS: sum(_unambiguous(f, spec) for f in questions),
        Signal.FOLLOWUPS: len(followups),
        Signal.DISSATISFIED_FOLLOWUPS: sum(f.data["sentiment"] == "dissatisfied"
                                           for f in followups),
        Signal.LATENCY_MS_MEAN: _mean([f.data["latency_ms"] for f in completions]),
        Signal.TTFT_MS_MEAN: _mean([f.data["ttft_ms"] for f in completions]),
        Signal.TURNS: ended.data["turns"] if ended is not None else len(completions),
    }
    values.update({Signal.kept_fraction_at(h): fraction for h, fraction in kept.items()})
    return {name: float(value) for name, value in values.items()}


def components(measured: dict[str, float], outcome: str, spec: RewardSpec) -> dict[str, float]:
    """Each weighted term, in a fixed order; the total is their sum."""
    w = spec.weights
    terms = {Component.kept_at(term.horizon_s):
             term.weight * measured[Signal.kept_fraction_at(term.horizon_s)]
             for term in sorted(spec.kept, key=lambda t: t.horizon_s)}
    terms.update({
        Component.ACCEPTED_EDITS: w.accepted_edit * measured[Signal.EDITS_ACCEPTED],
        Component.REJECTED_EDITS: w.rejected_edit * measured[Signal.EDITS_REJECTED],
        Component.REVERTED_EDITS: w.reverted_edit * measured[Signal.EDITS_REVERTED],
        Component.DISSATISFIED_FOLLOWUPS:
            w.dissatisfied_followup * measured[Signal.DISSATISFIED_FOLLOWUPS],
        Component.LATENCY: w.latency_s * measured[Signal.LATENCY_MS_MEAN] / 1000.0,
        Component.BROKEN_TOOL_CALLS: w.broken_tool_call * measured[Signal.BROKEN_TOOL_CALLS],
        Component.DEFERRED_EDITS: w.deferred_edit * measured[Signal.CLARIFICATIONS_UNAMBIGUOUS],
        Component.TURNS: w.turn * measured[Signal.TURNS],
        Component.OUTCOME: getattr(spec.outcome, outcome),
    })
    # A negative weight times zero is -0.0; records read better without the sign.
    return {name: value + 0.0 for name, value in terms.items()}


def _samples(facts: list[Fact]) -> list[dict[str, Any]]:
    """Each served completion once, as the fields of a :class:`Sample` (the record validates
    them all in one call, which is much cheaper than a model per sample)."""
    seen: set[str] = set()
    samples = []
    for fact in facts:
        if fact.type != COMPLETION_SERVED or fact.data["cid"] in seen:
            continue
        seen.add(fact.data["cid"])
        d = fact.data
        samples.append({
            "completion_id": d["cid"], "checkpoint_id": fact.checkpoint_id,
            "prompt_token_ids": d["prompt"], "completion_token_ids": d["tokens"],
            "behaviour_logprobs": [float(x) for x in d["logprobs"]],
            "temperature": float(d["temperature"]), "top_p": float(d["top_p"]),
            "top_k": int(d["top_k"]), "producer": d.get("producer"),
        })
    return samples


def reward_record(
    state: Trajectory, spec: RewardSpec, finalized_by: FinalisedBy, finalized_at_ms: int
) -> RewardRecord:
    """The record of a final trajectory: a function of its facts and the spec alone."""
    facts = ordered_facts(state)
    ended = ended_fact(facts)
    outcome: Outcome = ended.data["outcome"] if ended is not None else "unfinished"
    measured = signals(facts, spec)
    terms = components(measured, outcome, spec)
    # The gateway stamps each completion with the checkpoint and the arm it assigned; a client
    # event may name no arm ("default"), so both come from the first served completion.
    first = next((f for f in facts if f.type == COMPLETION_SERVED), facts[0])
    return RewardRecord.model_validate({
        "trajectory_id": state.trajectory_id,
        "spec_version": spec.version,
        "checkpoint_id": first.checkpoint_id,
        "arm": first.arm,
        "org_id": state.org_id,
        "task_family": ended.data["family"] if ended is not None else "default",
        "outcome": outcome,
        "ended_at": ms_to_datetime(ended.time_ms) if ended is not None else None,
        "finalized_by": finalized_by,
        "finalized_at": ms_to_datetime(finalized_at_ms),
        "samples": _samples(facts),
        "components": terms,
        "total": sum(terms.values()),
        "signals": measured,
        "event_ids": sorted(state.facts),
    })

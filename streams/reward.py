"""From a final trajectory state to its reward record: signals, weighted components, total.

Signals are raw measurements (counts, fractions, milliseconds); each component is one weight of
the spec times one signal, so a record shows exactly why it scored what it did. Failures are
scored, never skipped: broken tool calls, aborted, errored and unfinished trajectories all carry
their negative terms.
"""

from __future__ import annotations

from typing import Any, Literal

from schemas.rewards import RewardRecord
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
        if fact.type == "edit.persistence":
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
    completions = by_type.get("completion.served", [])
    tools = by_type.get("tool.called", [])
    questions = by_type.get("clarification.asked", [])
    followups = by_type.get("followup.sent", [])
    by_edit = edit_decisions(facts)
    decisions = list(by_edit.values())
    ended = ended_fact(facts)
    kept = _kept_fractions(facts, spec)
    checked = {(f.data["edit"], f.data["horizon_s"]) for f in by_type.get("edit.persistence", [])}
    expected = {(edit, h) for edit, decision in by_edit.items() if decision == "accepted"
                for h in spec.horizons_s}
    values: dict[str, float] = {
        "completions": len(completions),
        "completions_failed": sum(f.data["finish"] in ("abort", "error") for f in completions),
        "edits_proposed": len(decisions),
        "edits_accepted": decisions.count("accepted"),
        "edits_rejected": decisions.count("rejected"),
        "edits_reverted": decisions.count("reverted"),
        "edits_undecided": decisions.count(None),
        "kept_fraction": kept[spec.max_horizon_s],
        "persistence_checks": len(checked),
        "persistence_missing": len(expected - checked),
        "tool_calls": len(tools),
        "broken_tool_calls": sum(not f.data["valid"] for f in tools),
        "clarifications": len(questions),
        "clarifications_unambiguous": sum(_unambiguous(f, spec) for f in questions),
        "followups": len(followups),
        "dissatisfied_followups": sum(f.data["sentiment"] == "dissatisfied" for f in followups),
        "latency_ms_mean": _mean([f.data["latency_ms"] for f in completions]),
        "ttft_ms_mean": _mean([f.data["ttft_ms"] for f in completions]),
        "turns": ended.data["turns"] if ended is not None else len(completions),
    }
    values.update({f"kept_fraction_{h}s": fraction for h, fraction in kept.items()})
    return {name: float(value) for name, value in values.items()}


def components(measured: dict[str, float], outcome: str, spec: RewardSpec) -> dict[str, float]:
    """Each weighted term, in a fixed order; the total is their sum."""
    w = spec.weights
    terms = {f"kept_{term.horizon_s}s": term.weight * measured[f"kept_fraction_{term.horizon_s}s"]
             for term in sorted(spec.kept, key=lambda t: t.horizon_s)}
    terms.update({
        "accepted_edits": w.accepted_edit * measured["edits_accepted"],
        "rejected_edits": w.rejected_edit * measured["edits_rejected"],
        "reverted_edits": w.reverted_edit * measured["edits_reverted"],
        "dissatisfied_followups": w.dissatisfied_followup * measured["dissatisfied_followups"],
        "latency": w.latency_s * measured["latency_ms_mean"] / 1000.0,
        "broken_tool_calls": w.broken_tool_call * measured["broken_tool_calls"],
        "deferred_edits": w.deferred_edit * measured["clarifications_unambiguous"],
        "turns": w.turn * measured["turns"],
        "outcome": getattr(spec.outcome, outcome),
    })
    # A negative weight times zero is -0.0; records read better without the sign.
    return {name: value + 0.0 for name, value in terms.items()}


def _samples(facts: list[Fact]) -> list[dict[str, Any]]:
    """Each served completion once, as the fields of a :class:`Sample` (the record validates
    them all in one call, which is much cheaper than a model per sample)."""
    seen: set[str] = set()
    samples = []
    for fact in facts:
        if fact.type != "completion.served" or fact.data["cid"] in seen:
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
    first = next((f for f in facts if f.type == "completion.served"), facts[0])
    return RewardRecord.model_validate({
        "trajectory_id": state.trajectory_id,
        "spec_version": spec.version,
        "checkpoint_id": first.checkpoint_id,
        "arm": facts[0].arm,
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

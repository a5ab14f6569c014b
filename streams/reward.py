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
    EDIT_DECIDED,
    EDIT_PERSISTENCE,
    EDIT_PROPOSED,
    FOLLOWUP_SENT,
    TOOL_CALLED,
)
from schemas.rewards import Component, RewardRecord, Signal
from streams.facts import Fact, ms_to_datetime
from streams.fold import Trajectory, edit_decisions, ended_fact, ordered_facts
from streams.spec import RewardSpec

__all__ = ["FinalisedBy", "components", "record_fields", "reward_record", "signals"]

FinalisedBy = Literal["complete", "watermark"]
Outcome = Literal["completed", "aborted", "error", "unfinished"]


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _kept_sums(facts: list[Fact], spec: RewardSpec,
               decisions: dict[str, str | None]) -> dict[int, tuple[float, int]]:
    """Per horizon, the surviving fractions of the proposed edits summed, and how many edits
    count (``decisions``: the facts' :func:`~streams.fold.edit_decisions`). Rejected and
    reverted edits count as not kept; an accepted edit whose check is missing carries its last
    earlier check forward, and without any check it is left out (telemetry loss is not the
    policy's doing)."""
    checks: dict[str, dict[int, float]] = {}
    for fact in facts:
        if fact.type == EDIT_PERSISTENCE:
            checks.setdefault(fact.data["edit"], {}).setdefault(
                fact.data["horizon_s"], fact.data["fraction"])
    sums: dict[int, tuple[float, int]] = {}
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
        sums[horizon] = (total, counted)
    return sums


def _kept_fractions(sums: dict[int, tuple[float, int]]) -> dict[int, float]:
    """Share of proposed edits surviving at each horizon, from :func:`_kept_sums`."""
    return {horizon: total / counted if counted else 0.0
            for horizon, (total, counted) in sums.items()}


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
    kept = _kept_fractions(_kept_sums(facts, spec, by_edit))
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


def _sample(fact: Fact, turn: int) -> dict[str, Any]:
    d = fact.data
    return {
        "completion_id": d["cid"], "checkpoint_id": fact.checkpoint_id,
        "prompt_token_ids": d["prompt"], "completion_token_ids": d["tokens"],
        "behaviour_logprobs": [float(x) for x in d["logprobs"]],
        "temperature": float(d["temperature"]), "top_p": float(d["top_p"]),
        "top_k": int(d["top_k"]), "producer": d.get("producer"), "event_id": fact.event_id,
        "offset": fact.offset, "turn": turn, "served_at": ms_to_datetime(fact.time_ms),
        "finish_reason": d["finish"], "prompt_text": d.get("ptext"),
        "completion_text": d.get("ctext"), "text_truncated": bool(d.get("cut")),
        "tools_offered": d.get("offered"),
    }


def _owners(facts: list[Fact]) -> tuple[list[Fact], dict[str, list[Fact]]]:
    """The trajectory's completions (each id once, in order) and, by completion id, the other
    facts that are its own. A fact belongs to the latest completion served at or before it; a
    fact before the first completion to the first. Except: a tool call whose id is the
    completion's id and a suffix (the gateway's broken calls) is that completion's, and an
    edit's decision and persistence checks belong where the edit was proposed."""
    owned: dict[str, list[Fact]] = {}
    completions: list[Fact] = []
    for fact in facts:
        if fact.type == COMPLETION_SERVED and fact.data["cid"] not in owned:
            owned[fact.data["cid"]] = []
            completions.append(fact)
    if not completions:
        return completions, owned
    edit_owner: dict[str, str] = {}
    later: list[Fact] = []
    current = completions[0].data["cid"]
    for fact in facts:
        if fact.type == COMPLETION_SERVED:
            current = fact.data["cid"]
            continue
        owner = current
        if fact.type == TOOL_CALLED:
            prefix = fact.data.get("call", "").rpartition("-")[0]
            owner = prefix if prefix in owned else current
        elif fact.type == EDIT_PROPOSED:
            owner = edit_owner.setdefault(fact.data["edit"], current)
        elif fact.type in (EDIT_DECIDED, EDIT_PERSISTENCE):
            later.append(fact)  # once every proposal is placed
            edit_owner.setdefault(fact.data["edit"], current)
            continue
        owned[owner].append(fact)
    for fact in later:
        owned[edit_owner[fact.data["edit"]]].append(fact)
    return completions, owned


def _dissatisfied(facts: list[Fact]) -> int:
    return sum(f.type == FOLLOWUP_SENT and f.data["sentiment"] == "dissatisfied" for f in facts)


class _Own:
    """What a completion's own facts say of its edits, worked out once for its measures and
    its labels."""

    __slots__ = ("decisions", "facts", "sums")

    def __init__(self, facts: list[Fact], spec: RewardSpec) -> None:
        self.facts = facts
        by_edit = edit_decisions(facts)
        self.decisions = list(by_edit.values())
        self.sums = _kept_sums(facts, spec, by_edit)


def _measures(own: _Own, completion: Fact, spec: RewardSpec) -> dict[str, float]:
    """A completion's own part of each component's measure (keyed by component): how its
    credit is shared out."""
    facts, decisions = own.facts, own.decisions
    measures = {Component.kept_at(h): total for h, (total, _) in own.sums.items()}
    measures.update({
        Component.ACCEPTED_EDITS: decisions.count("accepted"),
        Component.REJECTED_EDITS: decisions.count("rejected"),
        Component.REVERTED_EDITS: decisions.count("reverted"),
        Component.DISSATISFIED_FOLLOWUPS: _dissatisfied(facts),
        Component.LATENCY: completion.data["latency_ms"],
        Component.BROKEN_TOOL_CALLS: sum(f.type == TOOL_CALLED and not f.data["valid"]
                                         for f in facts),
        Component.DEFERRED_EDITS: sum(f.type == CLARIFICATION_ASKED and _unambiguous(f, spec)
                                      for f in facts),
    })
    return measures


def _labels(own: _Own, spec: RewardSpec) -> dict[str, Any]:
    facts, decisions = own.facts, own.decisions
    return {
        "edits_proposed": len(decisions), "edits_accepted": decisions.count("accepted"),
        "edits_rejected": decisions.count("rejected"),
        "edits_reverted": decisions.count("reverted"),
        "kept_fraction": _kept_fractions(own.sums)[spec.max_horizon_s] if decisions else None,
        "dissatisfied_followups": _dissatisfied(facts),
        "clarifications": sum(f.type == CLARIFICATION_ASKED for f in facts),
    }


def _samples(facts: list[Fact], spec: RewardSpec,
             terms: dict[str, float]) -> list[dict[str, Any]]:
    """Each served completion once, as the fields of a :class:`Sample` (the record validates
    them all in one call, which is much cheaper than a model per sample), with its tool calls,
    labels and credit.

    The credit rule: each component of the total is shared among the completions in proportion
    to each one's own part of what the component measures (its edits accepted, rejected,
    reverted, kept at the horizon; its dissatisfied follow-ups, broken tool calls and deferring
    questions; its latency), or equally when no completion has any part of it (and always for
    turns and the outcome). The credits add up to the total."""
    completions, owned = _owners(facts)
    samples = [_sample(c, turn) for turn, c in enumerate(completions)]
    owns = [_Own(owned[c.data["cid"]], spec) for c in completions]
    measures = [_measures(own, c, spec) for own, c in zip(owns, completions, strict=True)]
    credits = [0.0] * len(completions)
    for name, value in terms.items():
        parts = [m.get(name, 0.0) for m in measures]
        whole = sum(parts)
        for i, part in enumerate(parts):
            credits[i] += value * part / whole if whole > 0 else value / len(parts)
    for sample, own, credit in zip(samples, owns, credits, strict=True):
        sample["tools_called"] = [{"tool": f.data.get("tool", "unknown"),
                                   "valid": f.data["valid"], "error_kind": f.data["error"]}
                                  for f in own.facts if f.type == TOOL_CALLED]
        sample["labels"] = _labels(own, spec)
        sample["credit"] = credit + 0.0
    return samples


def reward_record(
    state: Trajectory, spec: RewardSpec, finalized_by: FinalisedBy, finalized_at_ms: int
) -> RewardRecord:
    """The record of a final trajectory: a function of its facts and the spec alone."""
    return RewardRecord.model_validate(record_fields(state, spec, finalized_by, finalized_at_ms))


def record_fields(
    state: Trajectory, spec: RewardSpec, finalized_by: FinalisedBy, finalized_at_ms: int
) -> dict[str, Any]:
    """The fields of :func:`reward_record`'s record, not yet validated: the reward join
    validates them with :mod:`schemas.reward_structs`, the same bounds at less cost."""
    facts = ordered_facts(state)
    ended = ended_fact(facts)
    outcome: Outcome = ended.data["outcome"] if ended is not None else "unfinished"
    measured = signals(facts, spec)
    terms = components(measured, outcome, spec)
    # The gateway stamps each completion with the checkpoint and the arm it assigned; a client
    # event may name no arm ("default"), so both come from the first served completion.
    first = next((f for f in facts if f.type == COMPLETION_SERVED), facts[0])
    return {
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
        "partition": state.partition,
        "samples": _samples(facts, spec, terms),
        "components": terms,
        "total": sum(terms.values()),
        "signals": measured,
        "event_ids": sorted(state.facts),
    }

"""The export's three views of per-completion rows, and their Arrow schemas (pure).

- ``samples``: every row of ``schemas.samples`` as it is (prompt, completion, reward, credit,
  labels, token ids, behaviour logprobs, lineage).
- ``binary``: a completion and whether it was desirable, as KTO-style trainers take it. The rule:
  desirable when its credit is above the mean credit of the exported completions of its task
  family (its ``advantage``, credit minus that mean, is positive: the baseline the platform's
  trainer subtracts too), undesirable when below; an advantage of exactly zero says nothing and
  is left out. (Against zero instead, the spec's per-second latency and per-turn terms would
  make nearly every completion undesirable.)
- ``preferences``: chosen/rejected pairs, as DPO-style trainers take them. The rule: completions
  of one org served the same prompt (the same prompt token ids) are ranked by credit (ties by
  completion id); the best is paired with the worst, the second best with the second worst and
  so on, each pair only when the chosen one's credit is strictly higher and the two texts
  differ.

The text views hold only completions whose prompt and completion text the org allowed; every row
left out is counted under its reason. Rows come in log order (partition, offset), pairs by
prompt, so one log range always gives the same rows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from schemas.samples import SampleRow

__all__ = ["VIEWS", "View", "arrow_schema", "binary_view", "preference_view", "samples_view"]

VIEWS = ("samples", "preferences", "binary")
View = tuple[list[dict[str, Any]], Counter[str]]  # its rows, and what was left out, by reason

_IDS = ("org_id", "trajectory_id", "completion_id", "checkpoint_id")


def _log_order(rows: Sequence[SampleRow]) -> list[SampleRow]:
    return sorted(rows, key=lambda r: (r.source_partition if r.source_partition is not None
                                       else -1, r.source_offset if r.source_offset is not None
                                       else -1, r.org_id or "", r.completion_id))


def _with_text(rows: Sequence[SampleRow], skipped: Counter[str]) -> list[SampleRow]:
    kept = [r for r in _log_order(rows) if r.prompt is not None and r.completion is not None]
    if len(kept) < len(rows):
        skipped["no_text"] += len(rows) - len(kept)
    return kept


def samples_view(rows: Sequence[SampleRow]) -> View:
    return [r.model_dump(mode="json") for r in _log_order(rows)], Counter()


def binary_view(rows: Sequence[SampleRow]) -> View:
    skipped: Counter[str] = Counter()
    credits: dict[str, list[float]] = {}
    for row in _log_order(rows):
        credits.setdefault(row.task_family, []).append(row.credit)
    baseline = {family: sum(values) / len(values) for family, values in credits.items()}
    out = []
    for row in _with_text(rows, skipped):
        advantage = row.credit - baseline[row.task_family]
        if advantage == 0:
            skipped["zero_advantage"] += 1
            continue
        out.append({"prompt": row.prompt, "completion": row.completion, "label": advantage > 0,
                    "advantage": advantage, "credit": row.credit, "reward": row.reward,
                    **{name: getattr(row, name) for name in _IDS},
                    "spec_version": row.spec_version})
    return out, skipped


def preference_view(rows: Sequence[SampleRow]) -> View:
    skipped: Counter[str] = Counter()
    groups: dict[tuple[str, tuple[int, ...]], list[SampleRow]] = {}
    for row in _with_text(rows, skipped):
        groups.setdefault((row.org_id or "", tuple(row.prompt_token_ids)), []).append(row)
    out = []
    for key in sorted(groups):
        ranked = sorted(groups[key], key=lambda r: (-r.credit, r.completion_id))
        pairs = len(ranked) // 2
        for chosen, rejected in zip(ranked[:pairs], reversed(ranked[len(ranked) - pairs:]),
                                    strict=True):
            if chosen.credit <= rejected.credit or chosen.completion == rejected.completion:
                skipped["unpaired"] += 2
                continue
            out.append({"prompt": chosen.prompt, "chosen": chosen.completion,
                        "rejected": rejected.completion, "chosen_credit": chosen.credit,
                        "rejected_credit": rejected.credit, "org_id": chosen.org_id,
                        "chosen_completion_id": chosen.completion_id,
                        "rejected_completion_id": rejected.completion_id,
                        "chosen_checkpoint_id": chosen.checkpoint_id,
                        "rejected_checkpoint_id": rejected.checkpoint_id,
                        "spec_version": chosen.spec_version})
        skipped["unpaired"] += len(ranked) % 2
    return out, skipped


_STR, _INT, _FLOAT, _BOOL = pa.string(), pa.int64(), pa.float64(), pa.bool_()
_LABELS = pa.struct([(name, _INT) for name in (
    "edits_proposed", "edits_accepted", "edits_rejected", "edits_reverted")]
    + [("kept_fraction", _FLOAT), ("dissatisfied_followups", _INT), ("clarifications", _INT)])
_TOOL_USE = pa.struct([("tool", _STR), ("valid", _BOOL), ("error_kind", _STR)])


def arrow_schema(view: str, component_names: Sequence[str]) -> pa.Schema:
    """The columns of a view's Parquet file (fixed whatever rows it holds: a column whose
    values are all null keeps its type); ``component_names``: the spec's components."""
    if view == "binary":
        return pa.schema([("prompt", _STR), ("completion", _STR), ("label", _BOOL),
                          ("advantage", _FLOAT), ("credit", _FLOAT), ("reward", _FLOAT),
                          *[(name, _STR) for name in _IDS], ("spec_version", _STR)])
    if view == "preferences":
        return pa.schema([("prompt", _STR), ("chosen", _STR), ("rejected", _STR),
                          ("chosen_credit", _FLOAT), ("rejected_credit", _FLOAT),
                          ("org_id", _STR), ("chosen_completion_id", _STR),
                          ("rejected_completion_id", _STR), ("chosen_checkpoint_id", _STR),
                          ("rejected_checkpoint_id", _STR), ("spec_version", _STR)])
    return pa.schema([
        ("org_id", _STR), ("trajectory_id", _STR), ("completion_id", _STR), ("turn", _INT),
        ("checkpoint_id", _STR), ("arm", _STR), ("task_family", _STR), ("outcome", _STR),
        ("served_at", _STR), ("prompt", _STR), ("completion", _STR), ("text_truncated", _BOOL),
        ("prompt_token_ids", pa.list_(_INT)), ("completion_token_ids", pa.list_(_INT)),
        ("behaviour_logprobs", pa.list_(_FLOAT)), ("temperature", _FLOAT), ("top_p", _FLOAT),
        ("top_k", _INT), ("finish_reason", _STR), ("producer", _STR),
        ("tools_offered", pa.list_(_STR)), ("tools_called", pa.list_(_TOOL_USE)),
        ("reward", _FLOAT), ("components", pa.struct([(n, _FLOAT) for n in component_names])),
        ("credit", _FLOAT), ("labels", _LABELS), ("spec_version", _STR),
        ("source_partition", _INT), ("source_offset", _INT), ("event_id", _STR)])

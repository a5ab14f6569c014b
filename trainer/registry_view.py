"""Rows and a plain-text table of the registry for ``rewardstream registry list``."""

from __future__ import annotations

from typing import Any

from schemas.checkpoints import Registry
from trainer.gate import describe_gate

__all__ = ["event_rows", "render_rows"]

_COLUMNS = ("seq", "checkpoint", "status", "kind", "aliases", "parent", "actor", "evidence")


def _summary(evidence: dict[str, Any]) -> str:
    if "passed" in evidence:
        ab = evidence.get("ab")
        tail = f"; A/B {'pass' if ab.get('passed') else 'fail'}: {ab.get('reason')}" if ab else ""
        return describe_gate(evidence) + tail
    return "; ".join(f"{k}={v}" for k, v in evidence.items())


def event_rows(registry: Registry, history: bool) -> list[dict[str, Any]]:
    events = registry.history if history else sorted(registry.latest.values(),
                                                     key=lambda e: e.sequence)
    return [{
        "seq": e.sequence, "checkpoint": e.checkpoint_id, "status": e.status, "kind": e.kind,
        "aliases": ",".join(registry.aliases(e.checkpoint_id))
        if registry.latest[e.checkpoint_id] is e else "",
        "parent": e.parent_id or "", "actor": e.actor, "evidence": _summary(e.evidence),
    } for e in events]


def render_rows(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "the registry is empty"
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in _COLUMNS[:-1]}
    lines = ["  ".join(c.ljust(widths.get(c, 0)) for c in _COLUMNS)]
    lines += ["  ".join(str(r[c]).ljust(widths.get(c, 0)) for c in _COLUMNS) for r in rows]
    return "\n".join(line.rstrip() for line in lines)

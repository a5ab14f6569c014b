"""Rows and a plain-text table of the registry for ``rewardstream registry list``."""

from __future__ import annotations

from typing import Any

from trainer.registry import Registry

__all__ = ["event_rows", "render_rows"]

_COLUMNS = ("seq", "checkpoint", "status", "kind", "aliases", "parent", "actor", "evidence")


def _summary(evidence: dict[str, Any]) -> str:
    if "passed" in evidence:
        failed = [f["family"] for f in evidence.get("families", []) if not f["passed"]]
        overall = evidence.get("overall", {})
        verdict = "pass" if evidence["passed"] else f"fail {','.join(failed) or '*'}"
        return (f"gate {verdict}: mean diff {overall.get('mean_diff', 0):+.4f} "
                f"[{overall.get('lower', 0):+.4f}, {overall.get('upper', 0):+.4f}] "
                f"margin {evidence.get('margin')}")
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

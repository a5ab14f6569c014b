"""The canary in the demo: the release controller decides it (``streams.release``); the demo
waits for that decision on ``checkpoints`` and shows it as a row: the decision, the rule's
reason, the A/B table it read and the look's evidence (bounds, trajectories)."""

from __future__ import annotations

from harness.demo.report import CanaryRow
from schemas.checkpoints import CheckpointEvent, Registry
from streams.monitors.abreport import AbReport

__all__ = ["canary_row", "decision_of"]


def decision_of(registry: Registry, checkpoint_id: str) -> CheckpointEvent | None:
    """The event that ended the checkpoint's canary, or None while it runs (or waits)."""
    event = registry.latest.get(checkpoint_id)
    return event if event is not None and event.status != "canary" else None


def canary_row(event: CheckpointEvent) -> CanaryRow:
    """The row of a decided canary: promoted, rejected or aborted, with its evidence."""
    look = event.evidence.get("ab", {})
    decision = {"promoted": "promoted", "aborted": "aborted",
                "rolled_back": "rolled back"}.get(event.kind, "rejected")
    report = AbReport.from_evidence(look) if look.get("rows") else None
    return CanaryRow(event.checkpoint_id, decision, str(look.get("reason", event.kind)), report,
                     look)

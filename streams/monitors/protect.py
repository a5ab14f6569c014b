"""Auto-protect: which checkpoint a critical alert should roll back (the rollback itself is the
registry's, ``schemas.checkpoints.rollback``, the same events the CLI and the console write)."""

from __future__ import annotations

from schemas.alerts import Alert
from schemas.checkpoints import Registry

__all__ = ["auto_protect_target"]


def auto_protect_target(registry: Registry, alert: Alert) -> str | None:
    """The checkpoint to roll back: a critical alert against the current production checkpoint,
    raised over the fleet, or over the one org that checkpoint was trained for, comparing it with
    its parent. One org's traffic (which that org controls) never rolls back a model other orgs
    are served: its alert goes to staff instead. Nor does a drift against the checkpoint's own
    past: the checkpoint did not change, so rolling it back is no answer."""
    if alert.severity != "critical" or alert.labels.get("baseline") == "trailing":
        return None
    production = registry.production()
    checkpoint_id = alert.labels.get("checkpoint")
    if production is None or production.checkpoint_id != checkpoint_id:
        return None
    org = alert.labels.get("org", "*")
    if org != "*" and production.orgs != [org]:
        return None
    return checkpoint_id

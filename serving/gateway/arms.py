"""Sticky A/B arm assignment: a pure function of the user, the split and a salt.

A user hashes to a point in [0, 1). The first ``holdout_fraction`` of the interval is the holdout
(users kept on a fixed policy to measure the cumulative effect of training); the rest is divided
among the arms in proportion to their weights. Changing the split only moves the users whose
point crosses a boundary; changing the salt reshuffles everyone.

A started canary (``schemas.checkpoints.CanarySpec``) states its own share and scope: a user
of its scope (every org's, or one org's) who is not held out gets the ``canary`` arm when a
second point, hashed with the canary's own salt, falls below the share; everyone else is split
as configured. Each canary draws its users afresh, and a user keeps its arm for the canary's
life.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from schemas.release import CANARY_ARM
from serving.gateway.errors import ArmConfigError

__all__ = ["CANARY_ARM", "HOLDOUT_ARM", "ArmSpec", "ArmSplit", "CanaryOverlay", "assign_arm",
           "parse_arms", "user_point"]

HOLDOUT_ARM = "holdout"


@dataclass(frozen=True)
class CanaryOverlay:
    """The canary's stated share of its scope's users (``org`` None: the fleet's)."""

    share: float
    salt: str
    org: str | None = None

    def picks(self, user: str, org: str | None) -> bool:
        in_scope = self.org is None or self.org == org
        return in_scope and user_point(user, self.salt) < self.share


@dataclass(frozen=True)
class ArmSpec:
    """An arm's name, its share of non-holdout traffic, and what it serves.

    ``target`` is ``production`` (the registry's production checkpoint), ``candidate`` (the
    newest candidate, else production), ``canary`` (the checkpoint whose A/B runs: it passed the
    offline gate; else production), ``base`` (the backend's base model) or a checkpoint id.
    """

    name: str
    weight: float
    target: str


@dataclass(frozen=True)
class ArmSplit:
    arms: tuple[ArmSpec, ...] = (ArmSpec("production", 1.0, "production"),)
    holdout_fraction: float = 0.0
    holdout_target: str = "base"
    salt: str = "rewardstream"

    def __post_init__(self) -> None:
        if not self.arms:
            raise ArmConfigError("arms is empty; give at least one, e.g. production=1")
        names = [arm.name for arm in self.arms]
        if len(set(names)) != len(names) or HOLDOUT_ARM in names:
            raise ArmConfigError(f"arm names must be unique and not {HOLDOUT_ARM!r}: {names}")
        if any(arm.weight <= 0 for arm in self.arms):
            raise ArmConfigError(f"arm weights must be positive: {self.arms}")
        if not 0.0 <= self.holdout_fraction < 1.0:
            raise ArmConfigError(
                f"holdout_fraction={self.holdout_fraction} must be in [0, 1); e.g. 0.05"
            )

    def targets(self) -> dict[str, str]:
        """Every arm's target, the holdout's included when it gets traffic."""
        targets = {arm.name: arm.target for arm in self.arms}
        if self.holdout_fraction > 0:
            targets[HOLDOUT_ARM] = self.holdout_target
        return targets


def user_point(user: str, salt: str) -> float:
    """The user's uniform point in [0, 1): the first 64 bits of sha256(salt, user)."""
    digest = hashlib.sha256(f"{salt}\x00{user}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def assign_arm(user: str, split: ArmSplit, org: str | None = None,
               canary: CanaryOverlay | None = None) -> str:
    """The arm ``user`` (of ``org``) always gets under ``split`` and a started ``canary``."""
    point = user_point(user, split.salt)
    if point < split.holdout_fraction:
        return HOLDOUT_ARM
    if canary is not None and canary.picks(user, org):
        return CANARY_ARM
    position = (point - split.holdout_fraction) / (1.0 - split.holdout_fraction)
    total = sum(arm.weight for arm in split.arms)
    cumulative = 0.0
    for arm in split.arms:
        cumulative += arm.weight / total
        if position < cumulative:
            return arm.name
    return split.arms[-1].name  # rounding left position just below 1.0


def parse_arms(text: str) -> tuple[ArmSpec, ...]:
    """Arms from ``name=weight`` or ``name:target=weight`` items separated by commas.

    A bare name is its own target: ``production=0.9,candidate=0.1``; ``b:ckpt-42=0.5`` pins an
    arm named ``b`` to checkpoint ``ckpt-42``.
    """
    arms = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        head, sep, weight = item.partition("=")
        name, _, target = head.partition(":")
        try:
            value = float(weight)
        except ValueError:
            value = float("nan")
        if not sep or not name or value != value:
            raise ArmConfigError(
                f"arms item {item!r} is not name=weight or name:target=weight; "
                "e.g. --arms production=0.9,candidate=0.1"
            )
        arms.append(ArmSpec(name.strip(), value, (target or name).strip()))
    return tuple(arms)

"""Sticky arm assignment: the split over many users, stickiness, the holdout, config errors."""

from __future__ import annotations

from collections import Counter

import pytest

from serving.gateway.arms import HOLDOUT_ARM, ArmSpec, ArmSplit, assign_arm, parse_arms
from serving.gateway.errors import ArmConfigError

USERS = [f"user-{i}" for i in range(10_000)]


def test_split_over_ten_thousand_users_matches_weights_and_holdout() -> None:
    split = ArmSplit(parse_arms("production=0.7,candidate=0.3"), holdout_fraction=0.1)
    counts = Counter(assign_arm(user, split) for user in USERS)
    # Binomial standard deviation at n=10k is at most 0.5%; allow about 4 of them.
    assert counts[HOLDOUT_ARM] / 10_000 == pytest.approx(0.10, abs=0.02)
    assert counts["production"] / 10_000 == pytest.approx(0.9 * 0.7, abs=0.02)
    assert counts["candidate"] / 10_000 == pytest.approx(0.9 * 0.3, abs=0.02)


def test_assignment_is_sticky_and_salted() -> None:
    split = ArmSplit(parse_arms("a=1,b=1"))
    first = [assign_arm(user, split) for user in USERS[:500]]
    assert first == [assign_arm(user, split) for user in USERS[:500]]
    resalted = ArmSplit(split.arms, salt="other")
    assert first != [assign_arm(user, resalted) for user in USERS[:500]]


def test_growing_the_holdout_only_moves_users_into_it() -> None:
    small = ArmSplit(parse_arms("production=1"), holdout_fraction=0.05)
    large = ArmSplit(parse_arms("production=1"), holdout_fraction=0.10)
    held_small = {u for u in USERS if assign_arm(u, small) == HOLDOUT_ARM}
    held_large = {u for u in USERS if assign_arm(u, large) == HOLDOUT_ARM}
    assert held_small < held_large


def test_parse_arms_targets_and_errors() -> None:
    assert parse_arms("production=0.9, b:ckpt-42=0.1") == (
        ArmSpec("production", 0.9, "production"), ArmSpec("b", 0.1, "ckpt-42"))
    with pytest.raises(ArmConfigError, match="name=weight"):
        parse_arms("production")
    with pytest.raises(ArmConfigError, match="holdout_fraction"):
        ArmSplit(holdout_fraction=1.0)
    with pytest.raises(ArmConfigError, match="unique"):
        ArmSplit(parse_arms("a=1,a=2"))


def test_targets_include_holdout_only_when_it_gets_traffic() -> None:
    assert ArmSplit().targets() == {"production": "production"}
    assert ArmSplit(holdout_fraction=0.1).targets() == {"production": "production",
                                                        HOLDOUT_ARM: "base"}

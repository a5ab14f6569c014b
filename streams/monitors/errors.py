"""Errors of the monitors package; all derive from the project's root exception."""

from __future__ import annotations

from schemas.errors import RewardstreamError

__all__ = ["MonitorConfigError", "MonitorInputError"]


class MonitorConfigError(RewardstreamError):
    """The monitor configuration file names an unknown field or an out-of-range value."""


class MonitorInputError(RewardstreamError):
    """Input records (a reward file, an A/B arm) cannot be used as asked."""

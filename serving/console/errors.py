"""Errors of the console package."""

from __future__ import annotations

from schemas.errors import RewardstreamError

__all__ = ["ConsoleConfigError"]


class ConsoleConfigError(RewardstreamError):
    """The console cannot start as configured (staff keys, port)."""

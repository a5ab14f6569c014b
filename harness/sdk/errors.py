"""Errors the telemetry SDK raises on purpose."""

from __future__ import annotations

from schemas.errors import RewardstreamError

__all__ = ["TelemetryError"]


class TelemetryError(RewardstreamError):
    """The SDK is misconfigured (queue directory in use or unwritable, bad endpoint)."""

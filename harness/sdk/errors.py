"""Errors the telemetry SDK raises on purpose."""

from __future__ import annotations

from schemas.errors import RewardstreamError

__all__ = ["TelemetryError"]


class TelemetryError(RewardstreamError):
    """The SDK is misconfigured (its queue directory is in use by another live process)."""

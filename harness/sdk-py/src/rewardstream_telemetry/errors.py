"""Errors the telemetry SDK raises on purpose."""

from __future__ import annotations

__all__ = ["InvalidEventError", "QueueInUseError", "TelemetryError"]


class TelemetryError(Exception):
    """The SDK is misconfigured or was given something it cannot send; the message says what."""


class QueueInUseError(TelemetryError):
    """A disk queue's directory is held by another live process."""


class InvalidEventError(TelemetryError, ValueError):
    """An event (or an argument of a typed constructor) breaks its published schema; the message
    starts with the field's path (``payload.call_id: ...``)."""

"""Errors of the stream processors; each names what to fix."""

from __future__ import annotations

from schemas.errors import RewardstreamError

__all__ = ["ArchiveError", "ExportError", "MalformedEventError", "SpecError"]


class SpecError(RewardstreamError):
    """A reward spec file is missing, not TOML, or has a field that is wrong."""


class MalformedEventError(RewardstreamError):
    """A record on ``events.raw`` is not an event envelope (ingest validates, so this is rare)."""


class ArchiveError(RewardstreamError):
    """The Parquet archive is unreadable or inconsistent."""


class ExportError(RewardstreamError):
    """An export's range, view or format cannot be used."""

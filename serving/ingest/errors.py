"""Errors of the ingest service; each maps to one HTTP status."""

from __future__ import annotations

from schemas.errors import RewardstreamError

__all__ = [
    "BadBody",
    "IngestConfigError",
    "IngestError",
    "PayloadTooLarge",
    "UnsupportedEncoding",
]


class IngestError(RewardstreamError):
    """A request the ingest API refuses as a whole; ``status`` is its HTTP status code."""

    status = 400


class BadBody(IngestError):
    """The body is not a JSON array or NDJSON of objects, or its compression is broken."""

    status = 400


class PayloadTooLarge(IngestError):
    """The decompressed body is over a batch cap (bytes or events)."""

    status = 413


class UnsupportedEncoding(IngestError):
    """The Content-Encoding is neither identity, gzip nor zstd."""

    status = 415


class IngestConfigError(RewardstreamError):
    """The ingest service's configuration (API keys, secrets, caps) is missing or malformed."""

"""Errors of the ingest service; each maps to one HTTP status."""

from __future__ import annotations

from schemas.errors import RewardstreamError

__all__ = [
    "BadBody",
    "IngestConfigError",
    "IngestError",
    "KeyConfigError",
    "PayloadTooLarge",
    "UnsupportedEncoding",
]


class IngestError(RewardstreamError):
    """A request the ingest API refuses as a whole; ``status_code`` is its HTTP status."""

    status_code = 400


class BadBody(IngestError):
    """The body is not a JSON array or NDJSON of objects, or its compression is broken."""

    status_code = 400


class PayloadTooLarge(IngestError):
    """The decompressed body is over a batch cap (bytes or events)."""

    status_code = 413


class UnsupportedEncoding(IngestError):
    """The Content-Encoding is neither identity, gzip nor zstd."""

    status_code = 415


class IngestConfigError(RewardstreamError):
    """The ingest service's configuration (API keys, secrets, caps) is missing or malformed."""


class KeyConfigError(RewardstreamError):
    """API keys or the pseudonym secret, which every service reads the same way, are missing
    or malformed."""

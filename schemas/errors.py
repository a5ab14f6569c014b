"""The root exception of rewardstream.

Every error the platform raises on purpose derives from :class:`RewardstreamError`, so the CLI
prints its one-line message instead of a stack trace. It lives in ``schemas`` because that is the
one package every other package may import.
"""

from __future__ import annotations

__all__ = ["AlertActionError", "RegistryError", "RewardstreamError", "SchemaCompatibilityError"]


class RewardstreamError(Exception):
    """An expected failure whose message tells the operator what to do."""


class SchemaCompatibilityError(RewardstreamError):
    """A schema change would make earlier events unreadable."""


class RegistryError(RewardstreamError):
    """A registry command names an unknown checkpoint or an impossible transition."""


class AlertActionError(RewardstreamError):
    """An operator action does not apply: unknown alert, already resolved, a past expiry."""

"""Errors a gateway operator or client can cause."""

from __future__ import annotations

from schemas.errors import RewardstreamError

__all__ = ["ArmConfigError", "BackendError", "GatewayError", "RequestMetadataError"]


class GatewayError(RewardstreamError):
    """Root of the gateway's expected failures."""


class ArmConfigError(GatewayError):
    """The A/B split or holdout is malformed."""


class RequestMetadataError(GatewayError):
    """A request's trajectory/session/user metadata cannot be put on an event."""


class BackendError(GatewayError):
    """The inference backend refused or failed a request; carries its HTTP status."""

    def __init__(self, message: str, status_code: int = 502) -> None:
        super().__init__(message)
        self.status_code = status_code

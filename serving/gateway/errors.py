"""Errors a gateway operator or client can cause; a client's are answered in OpenAI's shape
(``serving.openai_errors``) naming the parameter at fault."""

from __future__ import annotations

from typing import Any

from serving.openai_errors import InvalidRequest, error_body

__all__ = ["ArmConfigError", "BackendError", "GatewayError", "RequestMetadataError",
           "refused_by_backend"]


class GatewayError(InvalidRequest):
    """Root of the gateway's expected failures; a client's request it refuses is a 400."""


class ArmConfigError(GatewayError):
    """The A/B split or holdout is malformed."""


class RequestMetadataError(GatewayError):
    """A request's trajectory/session/user metadata cannot be put on an event."""


class BackendError(GatewayError):
    """The inference backend refused or failed a request; carries its HTTP status, and for a
    refusal (4xx) the parameter the backend named, so the client sees the backend's own
    invalid_request_error; a failure (5xx, unreachable, a broken stream) is a server_error."""

    def __init__(self, message: str, status_code: int = 502, param: str | None = None,
                 code: str | None = None) -> None:
        super().__init__(message, param, code)
        self.status_code = status_code

    def body(self) -> dict[str, Any]:
        if self.status_code < 500:
            return super().body()
        return error_body(str(self), "server_error", None, None)


def refused_by_backend(status_code: int, body: Any, fallback: str) -> BackendError:
    """The client's error for a backend's error ``body`` (OpenAI's or vLLM's shape, or text)."""
    error = body.get("error", body) if isinstance(body, dict) else body
    if not isinstance(error, dict):
        return BackendError(str(error or fallback)[:500], status_code)
    param, code = error.get("param"), error.get("code")
    return BackendError(str(error.get("message", error))[:500], status_code,
                        param if isinstance(param, str) else None,
                        code if isinstance(code, str) else None)

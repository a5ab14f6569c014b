"""Errors a client of the torch engine can cause; the app answers them in OpenAI's shape
(``serving.openai_errors``), naming the parameter at fault."""

from __future__ import annotations

from serving.openai_errors import InvalidRequest

__all__ = ["AdapterNotFound", "EngineError", "UnsupportedRequest"]


class EngineError(InvalidRequest):
    """Root of the engine's refusals (400 unless a subclass says otherwise)."""


class UnsupportedRequest(EngineError):
    """A request asks for something the torch engine does not implement or allow."""


class AdapterNotFound(EngineError):
    status_code = 404

    def __init__(self, message: str) -> None:
        super().__init__(message, "model", "model_not_found")

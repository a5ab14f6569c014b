"""Errors a client of the torch engine can cause; the app answers them with 4xx JSON."""

from __future__ import annotations

from schemas.errors import RewardstreamError

__all__ = ["AdapterNotFound", "EngineError", "UnsupportedRequest"]


class EngineError(RewardstreamError):
    status_code = 400


class UnsupportedRequest(EngineError):
    """A request asks for something the torch engine does not implement or allow."""


class AdapterNotFound(EngineError):
    status_code = 404

"""The official OpenAI instrumentation, as installed from the lock; a mismatched install fails
the suite saying what to pin, rather than skipping what the suite exists to check."""

from __future__ import annotations

from importlib import metadata
from typing import Any

import pytest

__all__ = ["openai_instrumentor"]

_WORKS_WITH = "opentelemetry-util-genai==1.1b0"


def openai_instrumentor() -> Any:
    """A fresh ``OpenAIInstrumentor``."""
    try:
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
        from opentelemetry.util.genai.handler import TelemetryHandler
    except ImportError as exc:
        _mismatch(f"importing it fails ({exc})")
    if not hasattr(TelemetryHandler, "start_inference"):
        _mismatch("its TelemetryHandler has no start_inference")
    return OpenAIInstrumentor()


def _mismatch(problem: str) -> None:
    installed = {name: metadata.version(name) for name in (
        "opentelemetry-instrumentation-openai-v2", "opentelemetry-util-genai")}
    pytest.fail(f"the official OpenAI instrumentation cannot run here: {problem}. Installed: "
                f"{installed}; the instrumentation needs the util-genai API it was built "
                f"against: pin {_WORKS_WITH} in infra/requirements.lock", pytrace=False)

"""Fixtures of the integration tests that share a trained model."""

from __future__ import annotations

from pathlib import Path

import pytest
import tool_model


@pytest.fixture(scope="session")
def tool_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tool-calling test model (``tool_model.REPLIES``), built once per session."""
    return tool_model.build(tmp_path_factory.mktemp("tool-model"))

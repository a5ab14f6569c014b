"""A trainer killed with SIGKILL mid-cycle and resumed ends with the same weights as an
uninterrupted run, and every reward record is trained exactly once (real broker)."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.settings import Settings
from tests.support.trainer_run import assert_resumed_like_uninterrupted, kill_and_resume

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def test_sigkill_mid_cycle_then_resume_matches_an_uninterrupted_run(
    kafka: Settings, tiny_model_dir: Path, tmp_path: Path
) -> None:
    assert_resumed_like_uninterrupted(kill_and_resume(kafka, tiny_model_dir, tmp_path))

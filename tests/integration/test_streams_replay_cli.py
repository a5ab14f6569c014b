"""`rewardstream replay kafka --compare` on a log with poison: every record scored, the poison
listed as quarantined, exit 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from infra.settings import Settings
from streams.simlog import SimConfig, poison_log, simulate_log
from tests.support.streams_log import produce

pytestmark = pytest.mark.kafka


def test_replay_of_a_poisoned_log_scores_everything_else_and_lists_the_poison(
        kafka: Settings, tmp_path: Path) -> None:
    log, poison = poison_log(simulate_log(60, seed=41, config=SimConfig(mean_start_gap_s=60.0)),
                             seed=41)
    produce(kafka, log)
    spec = Path(__file__).parents[2] / "streams" / "specs" / "default.toml"
    other = tmp_path / "other.toml"
    other.write_text(spec.read_text().replace("broken_tool_call = -0.5",
                                              "broken_tool_call = -1.0"))
    env = {**os.environ, "REWARDSTREAM_TOPIC_PREFIX": kafka.topic_prefix}
    done = subprocess.run([sys.executable, "-m", "rewardstream", "replay", "kafka", "--compare",
                           str(other), "--out", str(tmp_path / "records.jsonl")],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"{len(poison)} records quarantined" in done.stdout
    for offset in poison:
        assert f"quarantined events.raw/0/{offset}:" in done.stdout
    assert '"spec_after"' in done.stdout
    assert len((tmp_path / "records.jsonl").read_text().splitlines()) > 10

"""A short demo end to end against the real broker: services, traffic, rewards, gate, plot."""

from __future__ import annotations

import json
import socket
import uuid
from pathlib import Path

import pytest
from rich.console import Console

from harness.demo.config import DemoConfig
from harness.demo.run import run_demo
from harness.policy.sft import SftConfig
from infra.settings import Settings

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

# A few SFT steps on a few tasks: the loop, not the policy's quality, is under test.
_QUICK_SFT = SftConfig(steps=40, tasks_per_family=2, demos_per_task=1)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.timeout(300)
def test_a_two_cycle_demo_produces_rewards_a_gate_decision_and_a_plot(
    kafka_settings: Settings, tmp_path: Path,
) -> None:
    config = DemoConfig(
        run_dir=tmp_path / "run", cycles=2, trajectories=4, concurrency=2, eval_per_family=1,
        sft=_QUICK_SFT, ingest_port=_free_port(), gateway_port=_free_port(),
        console_port=_free_port(), rewards_timeout_s=45.0,
    )
    prefix = f"t{uuid.uuid4().hex[:10]}-demo."
    rows = run_demo(config, prefix, Console(width=160, force_terminal=False))

    assert [r.cycle for r in rows] == [1, 2]
    assert all(r.figures.trajectories > 0 for r in rows)  # reward records came back
    assert all(r.decision in ("promoted", "rejected") for r in rows)
    assert (config.run_dir / "metrics.png").stat().st_size > 1000
    saved = json.loads((config.run_dir / "cycles.json").read_text())
    assert [c["decision"] for c in saved] == [r.decision for r in rows]
    assert sorted(p.name for p in config.log_dir.iterdir()) == sorted(
        f"{name}.log" for name in ("ingest", "gateway", "worker", "monitors-metrics",
                                   "monitors-detect", "console"))
    with socket.socket() as sock:  # every service was stopped: the gateway's port is free
        sock.bind(("127.0.0.1", config.gateway_port))

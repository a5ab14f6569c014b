"""A short demo end to end against the real broker: services, traffic, rewards, the gate, the
canary decided by the release controller, the registry's record of it, the plot; the shared
broker stays running."""

from __future__ import annotations

import io
import json
import socket
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from harness.demo.config import DemoConfig
from harness.demo.run import run_demo
from infra import broker
from infra.settings import Settings
from tests.support.demo_child import QUICK_SFT
from tests.support.ports import free_port
from trainer.registry_io import KafkaRegistryStore

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


@pytest.mark.timeout(600)
def test_a_two_cycle_demo_gates_a_candidate_runs_its_canary_and_plots(
    kafka_settings: Settings, tmp_path: Path,
) -> None:
    config = DemoConfig(
        run_dir=tmp_path / "run", cycles=2, trajectories=8, concurrency=2, eval_per_family=1,
        gate_margin=1.0, gate_broken_call_tolerance=1.0, sft=QUICK_SFT, ingest_port=free_port(),
        gateway_port=free_port(), console_port=free_port(), rewards_timeout_s=45.0,
        canary_max_trajectories=16,
    )
    prefix = f"t{uuid.uuid4().hex[:10]}-demo."
    shown = io.StringIO()
    rows = run_demo(config, prefix, Console(file=shown, width=160, force_terminal=False))

    assert [r.cycle for r in rows] == [1, 2]
    assert all(r.figures.trajectories > 0 for r in rows)  # reward records came back
    # A gate margin of 1 passes any candidate: cycle 1's serves the canary arm of cycle 2, whose
    # traffic goes on (two rounds of 8: its budget) until the release controller decides it;
    # the last cycle trains nothing (no traffic would be left to test it).
    assert rows[0].decision == "canary" and rows[0].canary is None
    canary = rows[1].canary
    assert canary is not None and canary.checkpoint == rows[0].candidate
    assert canary.decision in ("promoted", "rejected") and canary.reason
    assert rows[1].decision == "none"
    registry = KafkaRegistryStore(replace(kafka_settings, topic_prefix=prefix)).read()
    decided = registry.get(canary.checkpoint)
    assert decided.status == ("production" if canary.decision == "promoted" else "rejected")
    assert decided.evidence["passed"] is True  # the gate's, kept on the deciding event
    assert decided.evidence["ab"]["reason"] == canary.reason and decided.actor == "release"
    assert canary.trajectories == rows[1].figures.trajectories == 16  # its whole budget
    if canary.report is not None:  # both arms served: the same tasks' cycle-1 rewards adjust it
        assert canary.report.reward_variance_reduction is not None
        assert decided.evidence["ab"]["reward_variance_reduction"] == (
            canary.report.reward_variance_reduction)
    kinds = [e.kind for e in registry.history if e.checkpoint_id == canary.checkpoint]
    assert kinds[:3] == ["created", "evaluated", "canary_started"]
    assert kinds[-1] == ("promoted" if canary.decision == "promoted" else "rejected")
    assert set(kinds[3:-1]) <= {"canary_look"}

    assert (config.run_dir / "metrics.png").stat().st_size > 1000
    saved = json.loads((config.run_dir / "cycles.json").read_text())
    assert [c["decision"] for c in saved] == ["canary", "none"]
    summary = json.loads((config.run_dir / "summary.json").read_text())
    assert summary["promotions"] == (canary.decision == "promoted")
    assert (config.run_dir / "monitors-state").is_dir()  # not the working directory
    assert not Path(f"{prefix}rewardstream-monitors-data").exists()
    assert sorted(p.name for p in config.log_dir.iterdir()) == sorted(
        f"{name}.log" for name in ("ingest", "gateway", "worker", "monitors-metrics",
                                   "monitors-detect", "console", "release"))
    with socket.socket() as sock:  # every service was stopped: a new server could listen there
        # (as uvicorn does, reusing the address: the gateway's closed connections may linger
        # in TIME_WAIT, which is not a listener)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", config.gateway_port))
        sock.listen()
    text = shown.getvalue()
    assert "A/B: " in text and "stopped the services: ingest, gateway" in text
    assert "broker left running" in text and broker.status(kafka_settings).running

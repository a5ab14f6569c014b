"""A demo in its own process, for the interrupt tests: a quick policy, tiny cycles, the ports
and run directory given; the broker is whatever the environment names."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

from rich.console import Console

from harness.demo.config import DemoConfig
from harness.demo.run import run_demo
from harness.policy.sft import SftConfig

# The same quick warm start as test_demo_run, so the two share the cached policy.
QUICK_SFT = SftConfig(steps=40, tasks_per_family=2, demos_per_task=1)


def main(run_dir: str, ingest: int, gateway: int, console: int) -> None:
    config = DemoConfig(run_dir=Path(run_dir), cycles=50, trajectories=4, concurrency=2,
                        eval_per_family=1, sft=QUICK_SFT, ingest_port=ingest,
                        gateway_port=gateway, console_port=console, rewards_timeout_s=45.0)
    run_demo(config, f"t{uuid.uuid4().hex[:10]}-demo.", Console(width=160, force_terminal=False))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))

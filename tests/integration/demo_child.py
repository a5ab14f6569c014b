"""A demo in its own process, for the interrupt and fault tests: a quick policy, small cycles,
the ports and run directory given (the topic prefix, cycles and trajectories per cycle too,
optionally); the broker is whatever the environment names."""

from __future__ import annotations

import argparse
import sys
import uuid
from pathlib import Path

from rich.console import Console

from harness.demo.config import DemoConfig
from harness.demo.run import run_demo
from harness.policy.sft import SftConfig

# The same quick warm start as test_demo_run, so the two share the cached policy.
QUICK_SFT = SftConfig(steps=40, tasks_per_family=2, demos_per_task=1)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("ports", type=int, nargs=3, help="ingest, gateway, console")
    parser.add_argument("--prefix", default=f"t{uuid.uuid4().hex[:10]}-demo.")
    parser.add_argument("--cycles", type=int, default=50)
    parser.add_argument("--trajectories", type=int, default=4)
    parser.add_argument("--rewards-timeout-s", type=float, default=45.0)
    args = parser.parse_args(argv)
    ingest, gateway, console = args.ports
    config = DemoConfig(run_dir=args.run_dir, cycles=args.cycles, trajectories=args.trajectories,
                        concurrency=2, eval_per_family=1, sft=QUICK_SFT, ingest_port=ingest,
                        gateway_port=gateway, console_port=console,
                        rewards_timeout_s=args.rewards_timeout_s)
    run_demo(config, args.prefix, Console(width=160, force_terminal=False))


if __name__ == "__main__":
    main(sys.argv[1:])

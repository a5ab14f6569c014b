"""A demo in its own process, for the interrupt and fault tests: a quick policy, small cycles,
the ports and run directory given (the topic prefix, cycles and trajectories per cycle too,
optionally); the broker is whatever the environment names. ``--emitted-ids FILE`` writes the id
of every event the demo's SDK took, one a line, as it takes it: what the log must hold."""

from __future__ import annotations

import argparse
import sys
import threading
import uuid
from pathlib import Path

from rich.console import Console

from harness.demo import traffic
from harness.demo.config import DemoConfig
from harness.demo.run import run_demo
from harness.policy.sft import SftConfig
from schemas.events import Event

# The same quick warm start as test_demo_run, so the two share the cached policy.
QUICK_SFT = SftConfig(steps=40, tasks_per_family=2, demos_per_task=1)


def _record_taken_ids(path: Path) -> None:
    """Make the demo's SDK write the id of each event it takes to ``path`` (its own process's
    record of what it promised to deliver, whatever happens to the broker later)."""
    lock = threading.Lock()

    class RecordingTelemetry(traffic.Telemetry):
        def emit(self, event: Event) -> bool:
            taken = super().emit(event)
            if taken:
                with lock, path.open("a") as out:
                    out.write(f"{event.event_id}\n")
            return taken

    traffic.Telemetry = RecordingTelemetry  # type: ignore[misc]


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("ports", type=int, nargs=3, help="ingest, gateway, console")
    parser.add_argument("--prefix", default=f"t{uuid.uuid4().hex[:10]}-demo.")
    parser.add_argument("--cycles", type=int, default=50)
    parser.add_argument("--trajectories", type=int, default=4)
    parser.add_argument("--rewards-timeout-s", type=float, default=45.0)
    parser.add_argument("--emitted-ids", type=Path)
    parser.add_argument("--canary-max-trajectories", type=int,
                        default=DemoConfig.canary_max_trajectories)
    args = parser.parse_args(argv)
    if args.emitted_ids is not None:
        _record_taken_ids(args.emitted_ids)
    ingest, gateway, console = args.ports
    config = DemoConfig(run_dir=args.run_dir, cycles=args.cycles, trajectories=args.trajectories,
                        concurrency=2, eval_per_family=1, sft=QUICK_SFT, ingest_port=ingest,
                        gateway_port=gateway, console_port=console,
                        rewards_timeout_s=args.rewards_timeout_s,
                        canary_max_trajectories=args.canary_max_trajectories)
    run_demo(config, args.prefix, Console(width=160, force_terminal=False))


if __name__ == "__main__":
    main(sys.argv[1:])

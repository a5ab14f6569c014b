"""`rewardstream up` in a directory of a test's, from the quickstart's settings file, on a broker
of the test's (never the shared one), every service on a free port."""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.settings import Settings
from infra.supervisor import CLI
from rewardstream.stack.settings import SETTINGS
from tests.support.doc_blocks import marked_blocks
from tests.support.ports import free_port
from tests.support.private_kafka import local_broker_env

__all__ = ["UpStack", "quickstart_settings", "start_up"]

_QUICKSTART = Path(__file__).resolve().parents[2] / "docs" / "quickstart.md"


def quickstart_settings() -> str:
    """The settings file docs/quickstart.md has its reader save."""
    blocks = marked_blocks(_QUICKSTART.read_text(), "quickstart")
    return next(block.text for block in blocks if block.path == "rewardstream.toml")


@dataclass
class UpStack:
    directory: Path
    env: dict[str, str]

    def run(self, *args: str, timeout_s: float = 120.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*CLI, *args], cwd=self.directory, env=self.env, text=True,
                              capture_output=True, timeout=timeout_s)

    def port(self, key: str) -> int:
        return int(self.env[next(s.env for s in SETTINGS if s.key == key)])

    def status(self) -> dict[str, Any]:
        """``rewardstream status --json``: the run state and each service's readiness."""
        answer = self.run("status", "--json")
        assert answer.stdout.startswith("{"), answer.stdout + answer.stderr
        return dict(json.loads(answer.stdout))

    def logs(self, lines: int = 20) -> str:
        tails = []
        for log in sorted((self.directory / "run").glob("**/*.log")):
            text = log.read_text(errors="replace").splitlines()
            tails.append(f"--- {log.name}\n" + "\n".join(text[-lines:]))
        return "\n".join(tails)

    def wait_ready(self, timeout_s: float) -> float:
        """Until every service answers ready; the seconds it took."""
        began = time.monotonic()
        while True:
            state = self.status()
            if all(problem is None for problem in state["ready"].values()):
                return time.monotonic() - began
            assert time.monotonic() - began < timeout_s, (
                f"not ready after {timeout_s:.0f} s: {state['ready']}\n{self.logs()}")
            time.sleep(2.0)

    def down(self) -> subprocess.CompletedProcess[str]:
        return self.run("down", timeout_s=180.0)


def start_up(directory: Path, broker: Settings, extra_settings: str = "",
             ready_timeout_s: float = 420.0) -> UpStack:
    """Write the quickstart's settings (and ``extra_settings``) to ``directory`` and run
    ``rewardstream up --detach`` there against ``broker``; returns once every service is
    ready (AssertionError with the logs otherwise)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "rewardstream.toml").write_text(quickstart_settings() + extra_settings)
    env = {**local_broker_env(broker), "PYTHONUNBUFFERED": "1",
           **{s.env: str(free_port()) for s in SETTINGS
              if s.is_port and not s.key.startswith("kafka.")}}
    stack = UpStack(directory, env)
    answer = stack.run("up", "--detach", "--ready-timeout-s", f"{ready_timeout_s:g}",
                       timeout_s=ready_timeout_s + 120)
    assert answer.returncode == 0, f"{answer.stdout}\n{answer.stderr}\n{stack.logs()}"
    return stack

"""docs/quickstart.md as a reader runs it: its marked blocks in order, in one shell started in
the checkout, against the test broker under a topic prefix of its own, each port it defaults
and every port `rewardstream up` listens on moved to a free one (through their variables).
Every block succeeds, the services it starts in the background are still running at the end,
and every output the page shows is printed. The mechanism is in ``tests/support/doc_blocks.py``;
the convention is in docs/developing.md."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from infra.settings import Settings
from rewardstream.stack.settings import SETTINGS
from tests.support.doc_blocks import (
    DocBlock,
    block_outputs,
    marked_blocks,
    missing_lines,
    port_variables,
    shell_script,
    stop_process_group,
    stopped_jobs,
)
from tests.support.ports import free_port
from tests.support.sdk_ts_support import build_sdk_ts

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "docs" / "quickstart.md"
_SCRIPT_TIMEOUT_S = 420.0
# The services' ports; the broker's are the test broker's, from the environment.
_UP_PORTS = {s.key for s in SETTINGS if s.is_port and not s.key.startswith("kafka.")}


def _logs(directory: Path, lines: int = 15) -> str:
    """The last lines of the logs the blocks wrote in their scratch directory, which
    ``mktemp`` makes right under ``directory`` (the services' under its run directory)."""
    tails = []
    for log in sorted(directory.glob("*/**/*.log")):
        text = log.read_text(errors="replace").replace("\r", "\n").splitlines()
        tails.append(f"--- {log.name} (last {lines} lines)\n" + "\n".join(text[-lines:]))
    return "\n".join(tails) or "(no logs)"


def _failed_block(blocks: list[DocBlock], outputs: dict[int, str], why: str,
                  scratch: Path) -> str:
    index = max(outputs, default=0)
    block = blocks[index]
    return (f"docs/quickstart.md: {block.label} {why}\n{block.text}\n"
            f"--- it printed:\n{outputs.get(index, '')[-4000:]}\n{_logs(scratch)}")


def _shown_outputs(blocks: list[DocBlock]) -> list[tuple[int, DocBlock]]:
    """Each output block with the index of the run block it belongs to."""
    pairs, last_run = [], -1
    for index, block in enumerate(blocks):
        if block.kind == "run":
            last_run = index
        elif block.kind == "output":
            pairs.append((last_run, block))
    return pairs


def test_the_quickstart_runs_as_written(kafka: Settings, tmp_path: Path) -> None:
    build_sdk_ts()  # the page's "Before you start"
    blocks = marked_blocks(QUICKSTART.read_text(), "quickstart")
    script = tmp_path / "quickstart.sh"
    script.write_text(shell_script(blocks))
    env = {**os.environ, "REWARDSTREAM_TOPIC_PREFIX": kafka.topic_prefix,
           "TMPDIR": str(tmp_path), "npm_config_update_notifier": "false",
           **{name: str(free_port()) for name in port_variables(blocks)},
           **{s.env: str(free_port()) for s in SETTINGS if s.key in _UP_PORTS}}
    transcript = tmp_path / "quickstart.out"
    with transcript.open("w") as out:
        shell = subprocess.Popen(["bash", str(script)], cwd=ROOT, env=env, stdout=out,
                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 start_new_session=True)
        try:
            try:
                code: int | None = shell.wait(timeout=_SCRIPT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                code = None
            outputs, job_list = block_outputs(transcript.read_text(errors="replace"))
            if code is None:
                pytest.fail(_failed_block(blocks, outputs, f"ran past {_SCRIPT_TIMEOUT_S:g} s",
                                          tmp_path))
            if code != 0 or job_list is None:
                pytest.fail(_failed_block(blocks, outputs, f"failed (exit {code})", tmp_path))
            stopped = stopped_jobs(job_list)
            assert not stopped, (f"services the quickstart starts exited:\n"
                                 f"{chr(10).join(stopped)}\n{_logs(tmp_path)}")
            for run_index, shown in _shown_outputs(blocks):
                missing = missing_lines(shown.text, outputs[run_index])
                assert not missing, (f"docs/quickstart.md: {blocks[run_index].label} did not "
                                     f"print what {shown.label} shows: {missing}\n--- it "
                                     f"printed:\n{outputs[run_index]}")
        finally:
            if shell.poll() is None:
                shell.kill()
                shell.wait()
            stop_process_group(shell.pid)

"""The sandbox and the workspace contain what a policy's tool calls can do, with clear errors."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from harness.errors import SandboxViolation
from harness.tools.calls import parse_action
from harness.tools.executor import ToolBox
from harness.tools.sandbox import SandboxLimits, run_sandboxed
from harness.tools.workspace import Workspace

pytestmark = pytest.mark.slow


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (tmp_path / "secret.txt").write_text("outside")
    return Workspace(root)


def _call(box: ToolBox, text: str):
    return box.execute(parse_action(text, box.specs).calls)


@pytest.mark.parametrize("path", ["../secret.txt", "/etc/passwd", "sub/../../secret.txt"])
def test_paths_outside_the_workspace_are_refused(workspace: Workspace, path: str) -> None:
    with pytest.raises(SandboxViolation, match="absolute|escapes"):
        workspace.resolve(path)
    [outcome] = _call(ToolBox(workspace), f'<tool>read_file {{"path": "{path}"}}</tool>')
    assert (outcome.valid, outcome.error_kind) == (False, "sandbox_violation")
    assert "outside" not in outcome.observation


def test_symlinks_out_of_the_workspace_are_refused_and_not_copied(workspace: Workspace) -> None:
    os.symlink(workspace.root.parent / "secret.txt", workspace.root / "link.txt")
    with pytest.raises(SandboxViolation, match="symlink that leads outside"):
        workspace.resolve("link.txt")
    box = ToolBox(workspace)
    [outcome] = _call(
        box, '<tool>edit_file {"path": "link.txt", "search": "", "replace": "x"}</tool>')
    assert outcome.error_kind == "sandbox_violation"
    assert (workspace.root.parent / "secret.txt").read_text() == "outside"
    assert "link.txt" not in _call(box, "<tool>list_dir {}</tool>")[0].observation
    result = run_sandboxed(workspace, ["cat", "link.txt"])
    assert result.skipped_links == ("link.txt",)
    assert result.returncode != 0 and "outside" not in result.output


def test_runs_happen_in_a_copy(workspace: Workspace) -> None:
    result = run_sandboxed(workspace, ["python", "-c", "open('calc.py', 'w').write('x')"])
    assert result.ok
    assert "return a - b" in (workspace.root / "calc.py").read_text()


@pytest.mark.usefixtures("isolating_kernel")
def test_network_access_is_contained(workspace: Workspace) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    try:
        code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)"
        result = run_sandboxed(workspace, ["python", "-c", code])
    finally:
        listener.close()
    assert result.returncode != 0
    assert result.error == "network access is disabled in the sandbox"


def test_a_fork_bomb_is_contained(workspace: Workspace) -> None:
    limits = SandboxLimits(timeout_s=10, max_processes=16)
    result = run_sandboxed(workspace, ["python", "-c", "import os\nwhile True: os.fork()"], limits)
    assert not result.ok
    assert result.error in ("process limit reached (at most 16 processes)",
                            "timed out after 10 s; the command was stopped")


def test_unbounded_output_is_cut_and_the_command_stopped(workspace: Workspace) -> None:
    limits = SandboxLimits(max_output_bytes=1000)
    result = run_sandboxed(workspace, ["python", "-c", "while True: print('y' * 100)"], limits)
    assert result.output_truncated and len(result.output) == 1000
    assert result.returncode is None
    assert result.error == "output exceeded 1000 bytes; the command was stopped"


def test_time_and_memory_limits_say_which_limit(workspace: Workspace) -> None:
    slow = run_sandboxed(workspace, ["python", "-c", "while True: pass"],
                         SandboxLimits(timeout_s=0.5))
    assert slow.timed_out and slow.error == "timed out after 0.5 s; the command was stopped"
    big = run_sandboxed(workspace, ["python", "-c", "x = bytearray(1 << 31)"],
                        SandboxLimits(memory_bytes=256 << 20))
    assert big.error == "memory limit reached (256 MiB)"


def test_the_environment_is_scrubbed(workspace: Workspace, monkeypatch) -> None:
    monkeypatch.setenv("REWARDSTREAM_API_KEY", "k-secret")
    result = run_sandboxed(workspace, ["python", "-c", "import os; print(sorted(os.environ))"])
    assert "REWARDSTREAM_API_KEY" not in result.output and "HOME" in result.output


def test_the_run_tool_reports_exit_code_and_timeouts(workspace: Workspace) -> None:
    box = ToolBox(workspace, SandboxLimits(timeout_s=0.5))
    [ok] = _call(
        box, '<tool>run {"cmd": "python -c \\"import calc; print(calc.add(2, 3))\\""}</tool>')
    assert ok.valid and ok.observation == "exit 0\n-1"
    [slow] = _call(box, '<tool>run {"cmd": "python -c \\"while True: pass\\""}</tool>')
    assert (slow.valid, slow.error_kind) == (False, "timeout")

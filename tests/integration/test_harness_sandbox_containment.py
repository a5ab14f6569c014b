"""The sandbox fails closed, kills every descendant and bounds what a command writes.

Where this kernel gives the sandbox its namespaces, the isolated path runs here; the
fail-closed and unisolated paths run in ``sandbox_child.py``, a process on which the kernel
really refuses them (a user namespace with ``max_user_namespaces`` 0).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from harness.tools.sandbox import (
    ALLOW_UNISOLATED_ENV,
    SandboxLimits,
    run_sandboxed,
)
from harness.tools.workspace import Workspace
from infra.settings import cache_dir
from tests.support.sandbox_child import TOKEN_ENV, sleepers

pytestmark = pytest.mark.slow

_CHILD = str(Path(__file__).parents[1] / "support" / "sandbox_child.py")
needs_isolation = pytest.mark.usefixtures("isolating_kernel")
needs_root = pytest.mark.usefixtures("root")


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    return Workspace(root)


def _sleeper_token() -> str:
    """A unique ``sleep`` argument, so the test can find that process among all others."""
    return f"3600.{uuid.uuid4().int % 10**9:09d}"


def _escapers(token: str) -> dict[str, list[str]]:
    """Commands that leave a ``sleep`` behind outside their process group and exit."""
    setsid = (f"import subprocess; subprocess.Popen(['sleep', {token!r}], "
              "start_new_session=True); print('left one')")
    double_fork = (
        "import os\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execvp('sleep', ['sleep', {token!r}])\n"
        "    os._exit(0)\n"
        "os.wait()\nprint('left one')\n")
    hang = setsid + "; import time; time.sleep(60)"
    return {"setsid": ["python", "-c", setsid], "double-fork": ["python", "-c", double_fork],
            "setsid-then-timeout": ["python", "-c", hang]}


def _ended_as_expected(how: str, ok: bool, output: str) -> bool:
    return not ok if how.endswith("timeout") else ok and output == "left one\n"


def _as_non_root(scenario: str, *argv: str, env: dict[str, str] | None = None,
                 python: str = sys.executable) -> dict:
    environment = {k: v for k, v in os.environ.items() if k != ALLOW_UNISOLATED_ENV}
    result = subprocess.run([python, _CHILD, scenario, *argv], capture_output=True,
                            text=True, timeout=240, env={**environment, **(env or {})})
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.splitlines()[-1])


def _private_virtualenv() -> str:
    """A virtualenv as the bootstrap lays one out (a link to the base interpreter and a .pth
    naming the packages), in a mode-700 directory under the temporary directory: where a clone
    made with ``mktemp -d`` keeps its interpreter, which the jail covers with its scratch."""
    private = Path(tempfile.mkdtemp(prefix="rs-private-checkout-"))
    assert stat.S_IMODE(private.stat().st_mode) == 0o700
    venv = private / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = subprocess.run([str(venv / "bin" / "python"), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    (Path(site) / "rewardstream-test.pth").write_text("\n".join(sys.path[1:]) + "\n")
    return str(venv / "bin" / "python")


@needs_isolation
@pytest.mark.parametrize("how", ["setsid", "double-fork", "setsid-then-timeout"])
def test_descendants_that_left_the_process_group_are_killed(workspace: Workspace,
                                                            how: str) -> None:
    token = _sleeper_token()
    result = run_sandboxed(workspace, _escapers(token)[how], SandboxLimits(timeout_s=2))
    assert _ended_as_expected(how, result.ok, result.output) and result.isolated
    assert sleepers(token) == []


@needs_isolation
def test_a_huge_file_is_stopped_at_the_per_file_limit(workspace: Workspace) -> None:
    code = "open('big', 'wb').write(b'x' * (64 << 20))"
    limits = SandboxLimits(max_file_bytes=8 << 20)
    result = run_sandboxed(workspace, ["python", "-c", code], limits)
    assert result.returncode != 0
    assert result.error == "file size limit reached (8 MiB per file)"


@needs_isolation
@pytest.mark.parametrize("where", [".", "/tmp", "/dev/shm", "/var/tmp"])
def test_all_writes_together_are_capped_and_never_reach_the_host(workspace: Workspace,
                                                                  where: str) -> None:
    name = f"rs-fill-{uuid.uuid4().hex}"
    code = (f"import os\nfor i in range(64):\n"
            f"    open(os.path.join({where!r}, '{name}-%d' % i), 'wb').write(b'x' * (1 << 20))")
    limits = SandboxLimits(max_file_bytes=4 << 20, max_disk_bytes=16 << 20)
    result = run_sandboxed(workspace, ["python", "-c", code], limits)
    assert result.disk_full and "No space left on device" in result.output
    assert result.error == "disk limit reached (16 MiB or 10000 files in all)"
    if where != ".":
        assert not list(Path(where).glob(f"{name}-*"))


@needs_isolation
def test_too_many_files_count_as_a_full_disk(workspace: Workspace) -> None:
    code = "for i in range(5000): open('f%d' % i, 'w')"
    result = run_sandboxed(workspace, ["python", "-c", code], SandboxLimits(max_files=200))
    assert result.disk_full and result.returncode != 0


@needs_root
def test_as_a_non_root_user_the_sandbox_isolates_in_its_own_user_namespace() -> None:
    token = _sleeper_token()
    seen = _as_non_root("nonroot", env={TOKEN_ENV: token})
    assert seen["euid"] != 0 and seen["problem"] is None and seen["isolated"]
    assert seen["error"] == "disk limit reached (16 MiB or 10000 files in all)"
    assert seen["survivors"] == [] and sleepers(token) == []
    assert seen["online_error"] == "network access is disabled in the sandbox"


@needs_root
def test_a_checkout_whose_interpreter_sits_in_a_private_temporary_directory_isolates() -> None:
    python = _private_virtualenv()
    try:
        token = _sleeper_token()
        seen = _as_non_root("nonroot", env={TOKEN_ENV: token}, python=python)
        assert seen["euid"] != 0 and seen["problem"] is None and seen["isolated"]
        assert seen["survivors"] == [] and sleepers(token) == []
    finally:
        shutil.rmtree(Path(python).parents[2])


@needs_isolation
def test_a_program_under_the_temporary_directory_is_refused_with_the_reason(
        workspace: Workspace) -> None:
    hidden = Path(tempfile.mkdtemp(prefix="rs-hidden-program-"))
    try:
        program = hidden / "true"
        shutil.copy("/bin/true", program)
        result = run_sandboxed(workspace, [str(program)])
    finally:
        shutil.rmtree(hidden)
    assert result.returncode is None and result.error is not None
    assert f"could not start '{program}'" in result.error
    assert "which the sandbox replaces with its own empty scratch space" in result.error


@needs_isolation
@needs_root
def test_a_program_the_sandbox_user_may_not_reach_is_refused_naming_the_directory(
        workspace: Workspace) -> None:
    private = Path(tempfile.mkdtemp(prefix="rs-unreachable-", dir=cache_dir()))
    try:
        program = private / "true"
        shutil.copy("/bin/true", program)
        result = run_sandboxed(workspace, [str(program)])
    finally:
        shutil.rmtree(private)
    blocked = next(str(p) for p in reversed(program.parents) if not os.stat(p).st_mode & 0o001)
    assert result.error is not None and "Permission denied" in result.error
    assert f"uid 65534 may not enter {blocked}, mode 0o" in result.error


@needs_root
def test_without_namespaces_run_and_hidden_tests_refuse_with_the_way_out() -> None:
    seen = _as_non_root("refuse")
    assert seen["euid"] != 0 and "unshare" in seen["problem"]
    for refusal in (seen["run"], seen["hidden"]):
        assert refusal.startswith("refusing to run")
        assert "cannot isolate commands on this machine" in refusal
        assert f"{ALLOW_UNISOLATED_ENV}=1" in refusal


@needs_root
def test_an_allowed_unisolated_sandbox_says_so_on_every_result() -> None:
    seen = _as_non_root("allowed", env={ALLOW_UNISOLATED_ENV: "1"})
    assert seen["observation"] == "exit 0 [unisolated sandbox, allowed by the operator]"
    assert seen["hidden_passed"] and seen["hidden_isolated"] is False
    assert seen["evals"] and all(isolated is False for _, isolated in seen["evals"])


@needs_root
@pytest.mark.parametrize("how", ["setsid", "double-fork", "setsid-then-timeout"])
def test_an_unisolated_sandbox_still_kills_every_descendant(how: str) -> None:
    token = _sleeper_token()
    seen = _as_non_root("descendants", *_escapers(token)[how], env={TOKEN_ENV: token})
    assert _ended_as_expected(how, seen["ok"], seen["output"]) and seen["isolated"] is False
    assert seen["survivors"] == [] and sleepers(token) == []


@needs_root
def test_an_unisolated_sandbox_stops_a_command_that_fills_the_disk() -> None:
    seen = _as_non_root("disk")
    assert seen["disk_full"] and seen["returncode"] == -9  # killed once over the cap
    assert seen["error"] == "disk limit reached (16 MiB or 10000 files in all)"

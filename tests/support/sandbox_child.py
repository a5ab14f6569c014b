"""A non-root process, on which the kernel may refuse namespaces, for the sandbox's tests.

``python sandbox_child.py SCENARIO`` (as root) forks a child into a new user namespace in which
it is uid 1000 (root outside, so it can still read the project and its interpreter), then
re-executes this file there without capabilities: the sandbox takes its non-root path (its own
user namespace). For every scenario but ``nonroot`` the child also sets
``user.max_user_namespaces`` to 0 first, so the sandbox's probe fails as on a kernel that forbids
them. The scenario prints one JSON object.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import sys
import tempfile
from pathlib import Path

_CLONE_NEWUSER = 0x10000000
_INSIDE_UID = 1000
TOKEN_ENV = "SANDBOX_CHILD_TOKEN"


def _enter_refusing_namespace() -> None:
    ready_r, ready_w = os.pipe()
    mapped_r, mapped_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(_CLONE_NEWUSER) != 0:
            os._exit(3)
        os.write(ready_w, b"u")
        os.read(mapped_r, 1)
        if sys.argv[1] != "nonroot":
            Path("/proc/sys/user/max_user_namespaces").write_text("0")
        os.execv(sys.executable, [sys.executable, __file__, "--inside", *sys.argv[1:]])
    os.read(ready_r, 1)
    Path(f"/proc/{pid}/uid_map").write_text(f"{_INSIDE_UID} 0 1\n")
    Path(f"/proc/{pid}/gid_map").write_text(f"{_INSIDE_UID} 0 1\n")
    os.write(mapped_w, b"m")
    sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))


def sleepers(token: str) -> list[int]:
    """Live ``sleep TOKEN`` processes, wherever they are."""
    alive = []
    for entry in os.listdir("/proc"):
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes() if entry.isdigit() else b""
        except OSError:
            continue
        if cmdline == f"sleep\0{token}\0".encode():
            alive.append(int(entry))
    return alive


def _scenario(name: str) -> dict:
    from harness.errors import SandboxUnavailable
    from harness.tasks import all_tasks, materialise, run_hidden_tests
    from harness.tools.sandbox import SandboxLimits, isolation_problem, run_sandboxed
    from harness.tools.workspace import Workspace

    root = Path(tempfile.mkdtemp())
    (root / "ws").mkdir()
    workspace = Workspace(root / "ws")
    task = next(t for t in all_tasks() if not t.two_files)
    out: dict = {"euid": os.geteuid(), "problem": isolation_problem()}
    if name == "refuse":
        for label, attempt in (("run", lambda: run_sandboxed(workspace, ["true"])),
                               ("hidden", lambda: run_hidden_tests(task, workspace))):
            try:
                attempt()
                out[label] = "ran"
            except SandboxUnavailable as exc:
                out[label] = str(exc)
    elif name == "descendants":
        token = os.environ[TOKEN_ENV]
        limits = SandboxLimits(timeout_s=2, allow_unisolated=True)
        result = run_sandboxed(workspace, sys.argv[3:], limits)
        out.update(ok=result.ok, isolated=result.isolated, output=result.output,
                   survivors=sleepers(token))
    elif name == "nonroot":
        token = os.environ[TOKEN_ENV]
        escape = (f"import socket, subprocess; subprocess.Popen(['sleep', {token!r}], "
                  "start_new_session=True); open('big', 'wb').write(b'x' * (32 << 20))")
        limits = SandboxLimits(max_file_bytes=64 << 20, max_disk_bytes=16 << 20)
        result = run_sandboxed(workspace, ["python", "-c", escape], limits)
        online = run_sandboxed(workspace, ["python", "-c", "import socket; "
                                           "socket.create_connection(('127.0.0.1', 9), 2)"])
        out.update(isolated=result.isolated, error=result.error, survivors=sleepers(token),
                   online_error=online.error)
    elif name == "disk":
        code = "big = open('big', 'wb')\nwhile True: big.write(b'x' * (1 << 20))"
        limits = SandboxLimits(max_file_bytes=1 << 30, max_disk_bytes=16 << 20,
                               allow_unisolated=True, timeout_s=20)
        result = run_sandboxed(workspace, ["python", "-c", code], limits)
        out.update(error=result.error, disk_full=result.disk_full, returncode=result.returncode)
    elif name == "allowed":
        from harness.evals import HarnessEvalSuite
        from harness.policy.expert import ExpertPolicy
        from harness.tools.calls import parse_action
        from harness.tools.executor import ToolBox

        box = ToolBox(workspace, SandboxLimits(allow_unisolated=True))
        [outcome] = box.execute(parse_action('<tool>run {"cmd": "true"}</tool>', box.specs).calls)
        solved = materialise(task, root / "solved")
        for edit in task.solution:
            solved.write_text(edit.path, solved.read_text(edit.path).replace(edit.search,
                                                                            edit.replace))
        hidden = run_hidden_tests(task, solved)
        results = HarnessEvalSuite(per_family=1).evaluate_policy(ExpertPolicy, seed=0)
        out.update(observation=outcome.observation, hidden_passed=hidden.passed,
                   hidden_isolated=hidden.isolated,
                   evals=[(r.score, r.sandbox_isolated) for r in results])
    return out


if __name__ == "__main__":
    if sys.argv[1] != "--inside":
        _enter_refusing_namespace()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    print(json.dumps(_scenario(sys.argv[2])), flush=True)

"""Run a command in a throw-away copy of a workspace, with limits and without network.

Containment, layer by layer:
- **files**: the command runs in a fresh copy of the workspace (outward symlinks left out), with
  ``HOME`` and ``TMPDIR`` inside it; it cannot change the real workspace.
- **network**: a new, empty network namespace (``unshare(CLONE_NEWNET)``; as a non-root user
  inside a new user namespace). Where the kernel refuses both, the run still happens with a
  scrubbed environment (no proxy variables) and :attr:`RunResult.network_isolated` is False.
- **processes**: ``RLIMIT_NPROC`` (a fork bomb fails its forks); as root the command drops to
  ``nobody`` first, because the kernel does not apply that limit to root. The whole process
  group is killed when the command ends, times out or floods its output.
- **time, memory, output, files written**: wall-clock timeout, ``RLIMIT_CPU``, ``RLIMIT_AS``,
  a cap on captured output (the command is stopped when it passes it), ``RLIMIT_FSIZE``.

Not contained: reading world-readable files outside the copy by absolute path (there is no
filesystem jail); the tools' own path arguments are confined by :class:`Workspace` instead.
"""

from __future__ import annotations

import ctypes
import functools
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from harness.tools.workspace import Workspace

__all__ = ["RunResult", "SandboxLimits", "network_isolation_available", "run_sandboxed"]

_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_NOBODY = 65534
_SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True)
class SandboxLimits:
    timeout_s: float = 10.0
    cpu_s: int = 10
    memory_bytes: int = 1 << 30
    max_output_bytes: int = 16 * 1024
    max_processes: int = 64
    max_file_bytes: int = 16 << 20


@dataclass(frozen=True)
class RunResult:
    returncode: int | None  # None when the sandbox stopped the command
    output: str  # stdout and stderr interleaved, at most max_output_bytes
    error: str | None  # why the sandbox intervened or what limit the command hit, for people
    timed_out: bool = False
    output_truncated: bool = False
    network_isolated: bool = True
    skipped_links: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.error is None


def _libc_unshare(flags: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(flags) != 0:
        raise OSError(ctypes.get_errno(), "unshare failed")


def _drops_to_nobody() -> bool:
    return os.geteuid() == 0


def _isolate(isolate_network: bool, limits: SandboxLimits, nproc_limit: int) -> None:
    """Runs in the child between fork and exec: namespace, limits, then fewer privileges."""
    if isolate_network:
        _libc_unshare(_CLONE_NEWNET if _drops_to_nobody() else _CLONE_NEWUSER | _CLONE_NEWNET)
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s))
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.max_file_bytes, limits.max_file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if _drops_to_nobody():
        os.setgroups([])
        os.setgid(_NOBODY)
        os.setuid(_NOBODY)
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc_limit, nproc_limit))


@functools.cache
def network_isolation_available() -> bool:
    """Whether this machine lets the sandbox give a command its own, empty network namespace."""
    try:
        subprocess.run(
            ["/bin/true"], check=True, timeout=10,
            preexec_fn=lambda: _libc_unshare(
                _CLONE_NEWNET if _drops_to_nobody() else _CLONE_NEWUSER | _CLONE_NEWNET),
        )
    except (subprocess.SubprocessError, OSError):
        return False
    return True


def _processes_of(uid: int) -> int:
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                count += entry.stat().st_uid == uid
            except OSError:
                continue
    return count


def _sandbox_python() -> str:
    """The interpreter a sandboxed ``python`` means; one ``nobody`` can execute when we drop."""
    if not _drops_to_nobody():
        return sys.executable
    return shutil.which("python3", path=_SAFE_PATH) or sys.executable


def _argv(command: list[str]) -> list[str]:
    if command and command[0] in ("python", "python3"):
        return [_sandbox_python(), "-S", "-E", *command[1:]]
    return command


def _scrubbed_env(home: Path) -> dict[str, str]:
    # Nothing from the caller's environment: no tokens, no proxies, no PYTHONPATH.
    return {"PATH": _SAFE_PATH, "HOME": str(home), "TMPDIR": str(home / ".tmp"),
            "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"}


def _prepare_copy(workspace: Workspace, extra_files: dict[str, str]) -> tuple[Path, list[str]]:
    base = Path(tempfile.mkdtemp(prefix="rs-sandbox-"))
    copy = base / "work"
    skipped = workspace.copy_to(copy)
    for name, text in extra_files.items():
        (copy / name).write_text(text)
    (copy / ".tmp").mkdir(exist_ok=True)
    if _drops_to_nobody():
        os.chmod(base, 0o755)
        for dirpath, _, filenames in os.walk(copy):
            os.chown(dirpath, _NOBODY, _NOBODY)
            for name in filenames:
                os.chown(os.path.join(dirpath, name), _NOBODY, _NOBODY, follow_symlinks=False)
    return copy, skipped


def _read_capped(stream, cap_bytes: int, chunks: list[bytes], over: threading.Event) -> None:
    size = 0
    while block := stream.read1(4096):
        if size < cap_bytes:
            chunks.append(block[: cap_bytes - size])
        size += len(block)
        if size > cap_bytes:
            over.set()
            return


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _limit_note(output: str, limits: SandboxLimits) -> str | None:
    if "BlockingIOError" in output or "Resource temporarily unavailable" in output:
        return f"process limit reached (at most {limits.max_processes} processes)"
    if "MemoryError" in output:
        return f"memory limit reached ({limits.memory_bytes >> 20} MiB)"
    if "Network is unreachable" in output:
        return "network access is disabled in the sandbox"
    return None


def run_sandboxed(
    workspace: Workspace, command: list[str], limits: SandboxLimits = SandboxLimits(),
    extra_files: dict[str, str] | None = None,
) -> RunResult:
    """Run ``command`` (an argv list) in a fresh copy of ``workspace`` plus ``extra_files``."""
    isolate = network_isolation_available()
    copy, skipped = _prepare_copy(workspace, extra_files or {})
    uid = _NOBODY if _drops_to_nobody() else os.getuid()
    nproc_limit = _processes_of(uid) + limits.max_processes
    try:
        proc = subprocess.Popen(
            _argv(command), cwd=copy, env=_scrubbed_env(copy), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=functools.partial(_isolate, isolate, limits, nproc_limit),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        shutil.rmtree(copy.parent, ignore_errors=True)
        return RunResult(None, "", f"could not start {command[:1]}: {exc}",
                         network_isolated=isolate, skipped_links=tuple(skipped))
    chunks: list[bytes] = []
    over = threading.Event()
    reader = threading.Thread(target=_read_capped,
                              args=(proc.stdout, limits.max_output_bytes, chunks, over))
    reader.start()
    deadline = time.monotonic() + limits.timeout_s
    while proc.poll() is None and not over.is_set() and time.monotonic() < deadline:
        time.sleep(0.005)
    stopped = proc.poll() is None
    _kill_group(proc)
    proc.wait()
    reader.join(timeout=5)
    proc.stdout.close()
    shutil.rmtree(copy.parent, ignore_errors=True)
    output = b"".join(chunks).decode(errors="replace")
    error = None
    if over.is_set():
        error = f"output exceeded {limits.max_output_bytes} bytes; the command was stopped"
    elif stopped:
        error = f"timed out after {limits.timeout_s:g} s; the command was stopped"
    else:
        error = _limit_note(output, limits)
    return RunResult(
        returncode=None if stopped or over.is_set() else proc.returncode, output=output,
        error=error, timed_out=stopped and not over.is_set(),
        output_truncated=over.is_set(), network_isolated=isolate, skipped_links=tuple(skipped),
    )

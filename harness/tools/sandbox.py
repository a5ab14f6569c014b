"""Run a command in a throw-away copy of a workspace, with limits and without network.

Containment, layer by layer (the in-sandbox half is :mod:`harness.tools.jail`):
- **files**: the command runs in a fresh copy of the workspace (outward symlinks left out), with
  ``HOME`` and ``TMPDIR`` inside it; it cannot change the real workspace.
- **network, processes, disk**: new network, PID and mount namespaces (as a non-root user, inside
  a new user namespace). The network namespace is empty. The command's init is PID 1 of the PID
  namespace, so when the command ends the kernel kills every descendant, ``setsid`` and
  double-forked ones included. One tmpfs of ``max_disk_bytes`` holds the copy and stands in for
  every world-writable scratch directory (``/tmp``, ``/var/tmp``, ``/dev/shm``, ``/run/lock``),
  so all the command writes together is capped and gone afterwards.
- **fails closed**: where the kernel refuses those namespaces, :func:`run_sandboxed` raises
  :class:`SandboxUnavailable` unless the operator allowed an unisolated sandbox
  (``REWARDSTREAM_SANDBOX_ALLOW_UNISOLATED=1`` or ``SandboxLimits(allow_unisolated=True)``).
  Such runs are logged, carry ``isolated=False`` and have network access; orphans are still
  collected (the jail is a child subreaper) and killed, and the copy's size is polled against
  the disk cap, but writes elsewhere are bounded only per file.
- **privileges and limits**: as root the command drops to ``nobody`` (the kernel does not apply
  ``RLIMIT_NPROC`` to root); ``RLIMIT_NPROC``, ``RLIMIT_CPU``, ``RLIMIT_AS``, ``RLIMIT_FSIZE``,
  a wall-clock timeout and a cap on captured output (the command is stopped when it passes it).

Not contained: reading world-readable files outside the copy by absolute path (there is no
filesystem jail); the tools' own path arguments are confined by :class:`Workspace` instead.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from harness.errors import SandboxUnavailable
from harness.tools.jail_run import JailRun, run_jail
from harness.tools.workspace import Workspace

__all__ = ["ALLOW_UNISOLATED_ENV", "RunResult", "SandboxLimits", "isolation_problem",
           "run_sandboxed"]

ALLOW_UNISOLATED_ENV = "REWARDSTREAM_SANDBOX_ALLOW_UNISOLATED"
_log = logging.getLogger("rewardstream.sandbox")
_NOBODY = 65534
_SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
_REPROBE_AFTER_S = 60.0


@dataclass(frozen=True)
class SandboxLimits:
    timeout_s: float = 10.0
    cpu_s: int = 10
    memory_bytes: int = 1 << 30
    max_output_bytes: int = 16 * 1024
    max_processes: int = 64
    max_file_bytes: int = 16 << 20  # one file
    max_disk_bytes: int = 64 << 20  # everything written, the copy included (RAM: it is a tmpfs)
    max_files: int = 10_000  # files and directories, the copy included
    allow_unisolated: bool = False  # run even where namespaces are refused (see the module doc)


@dataclass(frozen=True)
class RunResult:
    returncode: int | None  # None when the sandbox stopped the command
    output: str  # stdout and stderr interleaved, at most max_output_bytes
    error: str | None  # why the sandbox intervened or what limit the command hit, for people
    timed_out: bool = False
    output_truncated: bool = False
    isolated: bool = True  # False only where the operator allowed an unisolated sandbox
    skipped_links: tuple[str, ...] = ()
    disk_full: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.error is None


def _drops_to_nobody() -> bool:
    return os.geteuid() == 0


def _sandbox_python() -> str:
    """The interpreter a sandboxed ``python`` means; one ``nobody`` can execute when we drop.

    A virtualenv's ``python`` is a link to its base interpreter, and the sandbox runs Python
    with ``-S -E`` (no site-packages), so the link is resolved: a virtualenv under ``/tmp``,
    which the jail replaces with its scratch space, would otherwise vanish before the exec."""
    if not _drops_to_nobody():
        return os.path.realpath(sys.executable)
    return shutil.which("python3", path=_SAFE_PATH) or os.path.realpath(sys.executable)


def _argv(command: list[str]) -> list[str]:
    if command and command[0] in ("python", "python3"):
        return [_sandbox_python(), "-S", "-E", *command[1:]]
    return command


def _scrubbed_env(home: Path) -> dict[str, str]:
    # Nothing from the caller's environment: no tokens, no proxies, no PYTHONPATH.
    return {"PATH": _SAFE_PATH, "HOME": str(home), "TMPDIR": str(home / ".tmp"),
            "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"}


def _processes_of(uid: int) -> int:
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                count += entry.stat().st_uid == uid
            except OSError:
                continue
    return count


def _prepare_copy(workspace: Workspace | None,
                  extra_files: dict[str, str]) -> tuple[Path, list[str]]:
    base = Path(tempfile.mkdtemp(prefix="rs-sandbox-"))
    copy = base / "work"
    skipped = workspace.copy_to(copy) if workspace else []
    copy.mkdir(exist_ok=True)
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


def _jail_settings(copy: Path, limits: SandboxLimits, isolate: bool) -> list[str]:
    """The jail's ``KEY=VALUE`` words (parsed by ``jail.Settings``)."""
    uid = _NOBODY if _drops_to_nobody() else os.getuid()
    settings = {
        "isolate": int(isolate), "workdir": copy, "scratch_root": copy.parent.parent,
        "disk_bytes": limits.max_disk_bytes, "max_files": limits.max_files,
        "drop_to_uid": _NOBODY if _drops_to_nobody() else "", "cpu_s": limits.cpu_s,
        "memory_bytes": limits.memory_bytes, "file_bytes": limits.max_file_bytes,
        "core_bytes": 0,
        # the jail and its init count too; the limit is per user, so others' count is added
        "nproc": _processes_of(uid) + limits.max_processes + 2,
    }
    return [f"{key}={value}" for key, value in settings.items()]


def _launch(copy: Path, argv: list[str], limits: SandboxLimits, isolate: bool,
            stdin: bytes = b"") -> JailRun:
    return run_jail(_sandbox_python(), copy, _jail_settings(copy, limits, isolate), argv,
                    _scrubbed_env(copy), limits.timeout_s, limits.max_output_bytes, stdin)


def _probe() -> str | None:
    copy, _ = _prepare_copy(None, {})
    try:
        launch = _launch(copy, [_sandbox_python(), "-I", "-S", "-c", "pass"],
                         replace(SandboxLimits(), max_processes=4), isolate=True)
    except OSError as exc:
        return f"could not start the sandbox: {exc}"
    finally:
        shutil.rmtree(copy.parent, ignore_errors=True)
    if launch.report.get("wait_status") == "0":
        return None
    return launch.report.get("error") or f"the sandbox's probe failed: {launch.output[:300]}"


_probed: list[tuple[float, str | None]] = []  # the last probe: when, and its answer
_probe_lock = threading.Lock()


def isolation_problem() -> str | None:
    """None when this machine gives the sandbox its namespaces and tmpfs; else why not.

    A success is kept for the process's life; a failure is probed again after a minute, so a
    passing shortage (processes, memory) does not refuse every run that follows."""
    with _probe_lock:
        if not _probed or (_probed[0][1] is not None
                           and time.monotonic() - _probed[0][0] > _REPROBE_AFTER_S):
            _probed[:] = [(time.monotonic(), _probe())]
        return _probed[0][1]


def _unisolated_allowed(limits: SandboxLimits) -> bool:
    return limits.allow_unisolated or os.environ.get(ALLOW_UNISOLATED_ENV) == "1"


@functools.cache
def _warn_unisolated(problem: str) -> None:
    _log.warning("sandbox runs WITHOUT isolation (network reachable, host /tmp writable), "
                 "as the operator allowed: %s", problem)


def _isolate(limits: SandboxLimits, command: list[str]) -> bool:
    """Whether to isolate; raises when isolation is unavailable and not explicitly waived."""
    problem = isolation_problem()
    if problem is None:
        return True
    if not _unisolated_allowed(limits):
        raise SandboxUnavailable(
            f"refusing to run {command[:1]}: the sandbox cannot isolate commands on this machine "
            f"({problem}). Set {ALLOW_UNISOLATED_ENV}=1 (or SandboxLimits(allow_unisolated=True)) "
            "to run them without network, process and disk isolation.")
    _warn_unisolated(problem)
    return False


def _limit_note(launch: JailRun, returncode: int | None, limits: SandboxLimits) -> str | None:
    output = launch.output
    if launch.report.get("disk_full") == "1":
        return f"disk limit reached ({limits.max_disk_bytes >> 20} MiB or {limits.max_files} " \
               "files in all)"
    if returncode == -signal.SIGXFSZ or "File too large" in output:
        return f"file size limit reached ({limits.max_file_bytes >> 20} MiB per file)"
    if returncode == -signal.SIGXCPU:
        return f"CPU time limit reached ({limits.cpu_s} s)"
    if "BlockingIOError" in output or "Resource temporarily unavailable" in output:
        return f"process limit reached (at most {limits.max_processes} processes)"
    if "MemoryError" in output:
        return f"memory limit reached ({limits.memory_bytes >> 20} MiB)"
    if "Network is unreachable" in output:
        return "network access is disabled in the sandbox"
    return None


def run_sandboxed(
    workspace: Workspace, command: list[str], limits: SandboxLimits = SandboxLimits(),
    extra_files: dict[str, str] | None = None, stdin: bytes = b"",
) -> RunResult:
    """Run ``command`` (an argv list) in a fresh copy of ``workspace`` plus ``extra_files``,
    with ``stdin`` as its standard input. Raises :class:`SandboxUnavailable` (see above)."""
    isolate = _isolate(limits, command)
    copy, skipped = _prepare_copy(workspace, extra_files or {})
    try:
        launch = _launch(copy, _argv(command), limits, isolate, stdin)
    except OSError as exc:
        return RunResult(None, "", f"could not start the sandbox: {exc}", isolated=isolate,
                         skipped_links=tuple(skipped))
    finally:
        shutil.rmtree(copy.parent, ignore_errors=True)
    stopped = RunResult(None, launch.output, None, isolated=isolate,
                        skipped_links=tuple(skipped),
                        disk_full=launch.report.get("disk_full") == "1")
    if launch.output_over:
        return replace(stopped, error=f"output exceeded {limits.max_output_bytes} bytes; the "
                       "command was stopped", output_truncated=True)
    if launch.timed_out:
        return replace(stopped, error=f"timed out after {limits.timeout_s:g} s; the command was "
                       "stopped", timed_out=True)
    if "wait_status" not in launch.report:
        return replace(stopped, error=launch.report.get("error", "the sandbox failed"))
    returncode = os.waitstatus_to_exitcode(int(launch.report["wait_status"]))
    return replace(stopped, returncode=returncode, error=_limit_note(launch, returncode, limits))

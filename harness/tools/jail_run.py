"""Starting the sandbox's jail process (:mod:`harness.tools.jail`) and watching it: the
wall-clock timeout, the cap on captured output, the stop, and the jail's report."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

__all__ = ["JailRun", "run_jail"]

_JAIL_SOURCE = (Path(__file__).parent / "jail.py").read_text()
_STOP_GRACE_S = 2.0  # for the jail to kill the command's descendants before it is killed


@dataclass(frozen=True)
class JailRun:
    report: dict[str, str]  # the jail's status (see jail.py); empty when stopped or dead
    output: str  # stdout and stderr interleaved, at most the cap
    output_over: bool  # the output passed the cap, and the command was stopped
    timed_out: bool  # the timeout passed, and the command was stopped


def _read_capped(stream: IO[bytes], cap_bytes: int, chunks: list[bytes],
                 over: threading.Event) -> None:
    size = 0
    while block := os.read(stream.fileno(), 4096):  # what has arrived, up to 4 KiB
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


def _stop(proc: subprocess.Popen) -> None:
    """Ask the jail to kill everything it started; kill its process group if it does not."""
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(_STOP_GRACE_S)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    _kill_group(proc)


def _read_report(status_r: int) -> dict[str, str]:
    fcntl.fcntl(status_r, fcntl.F_SETFL, os.O_NONBLOCK)
    try:
        data = os.read(status_r, 1 << 16)
    except BlockingIOError:
        data = b""
    os.close(status_r)
    return dict(line.split("=", 1) for line in data.decode(errors="replace").splitlines()
                if "=" in line)


def run_jail(python: str, workdir: Path, settings: list[str], argv: list[str],
             env: dict[str, str], timeout_s: float, max_output_bytes: int,
             stdin: bytes = b"") -> JailRun:
    """Run ``argv`` under the jail (``settings``: its ``KEY=VALUE`` words, but ``status_fd``)."""
    status_r, status_w = os.pipe()
    jail = [python, "-I", "-S", "-c", _JAIL_SOURCE, *settings, f"status_fd={status_w}", "--",
            *argv]
    try:
        proc = subprocess.Popen(
            jail, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL, start_new_session=True,
            pass_fds=(status_w,))
    except BaseException:
        os.close(status_r)
        raise
    finally:
        os.close(status_w)
    # Opened with pipes: stdout always, stdin when there is something to feed it.
    assert proc.stdout is not None and (proc.stdin is not None or not stdin)
    if stdin and proc.stdin is not None:
        try:
            proc.stdin.write(stdin)
            proc.stdin.close()
        except OSError:
            pass  # the command ended without reading it
    chunks: list[bytes] = []
    over = threading.Event()
    reader = threading.Thread(target=_read_capped,
                              args=(proc.stdout, max_output_bytes, chunks, over))
    reader.start()
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None and not over.is_set() and time.monotonic() < deadline:
        time.sleep(0.005)
    stopped = proc.poll() is None
    if stopped:
        _stop(proc)
    _kill_group(proc)
    proc.wait()
    reader.join(timeout=5)
    proc.stdout.close()
    report = _read_report(status_r)
    return JailRun({} if stopped else report, b"".join(chunks).decode(errors="replace"),
                   over.is_set(), stopped and not over.is_set())

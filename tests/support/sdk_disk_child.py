"""An SDK process whose disk really fills up, then frees space again.

``python sdk_disk_child.py MODE DIR`` prints one JSON object of what it saw. MODE ``tmpfs``
mounts a 256 KiB tmpfs on DIR in a private mount namespace (as root, or inside a new user
namespace otherwise), so writes fail with ENOSPC; MODE ``fsize`` lowers RLIMIT_FSIZE instead
(SIGXFSZ is ignored, as Python does), so writes past 64 KiB in one file fail with EFBIG. The
ingest server is an in-process transport that answers 503 until the disk has filled, then 200.
"""

from __future__ import annotations

import ctypes
import gzip
import json
import os
import resource
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

from rewardstream_telemetry import Request, Response

_CLONE_NEWNS, _CLONE_NEWUSER = 0x00020000, 0x10000000
_MS_REC, _MS_PRIVATE = 16384, 1 << 18


def _mount_small_tmpfs(directory: Path) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.getuid(), os.getgid()
    flags = _CLONE_NEWNS if uid == 0 else _CLONE_NEWNS | _CLONE_NEWUSER
    if libc.unshare(flags) != 0:
        raise OSError(ctypes.get_errno(), "unshare")
    if uid != 0:
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    for args in ((b"none", b"/", None, _MS_REC | _MS_PRIVATE, None),
                 (b"tmpfs", str(directory).encode(), b"tmpfs", 0, b"size=256k")):
        if libc.mount(*args) != 0:
            raise OSError(ctypes.get_errno(), "mount")


class _Ingest:
    """Answers 503 while ``down``, then takes every event; keeps the lines it took."""

    def __init__(self) -> None:
        self.down = True
        self.lines: list[dict] = []
        self.lock = threading.Lock()
        self.refusing = threading.Event()  # set once the sender is retrying its first batch

    def __call__(self, request: Request) -> Response:
        if self.down:
            self.refusing.set()
            return Response.of_json(503, headers={"Retry-After": "0"}, value={"detail": "down"})
        events = [json.loads(line) for line in gzip.decompress(request.body).splitlines()]
        with self.lock:
            self.lines.extend(events)
        ids = [event["event_id"] for event in events]
        return Response.of_json(200, {"accepted": ids, "duplicates": [], "rejected": []})


def _event(i: int) -> object:
    from schemas import events as ev
    from schemas.ids import uuid7

    now = datetime.now(UTC)
    return ev.ToolCalled(event_id=uuid7(int(now.timestamp() * 1000)), occurred_at=now,
                         sent_at=now, trajectory_id="traj-disk", session_id="session-disk",
                         user="user-1", checkpoint_id="ckpt-0",
                         payload=ev.ToolCalledPayload(call_id=f"c{i}", tool="read_file",
                                                      valid=True))


def main(mode: str, directory: Path) -> dict:
    from rewardstream_telemetry import Telemetry

    if mode == "tmpfs":
        _mount_small_tmpfs(directory)
    else:
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, resource.RLIM_INFINITY))
    ingest = _Ingest()
    tel = Telemetry("http://ingest.invalid", "k", queue_dir=directory / "q", linger_s=0.05,
                    batch_size=50, backoff_base_s=0.01, backoff_cap_s=0.05,
                    retry_max_attempts=10**9, retry_budget_s=3600.0,
                    transport=ingest)
    accepted: list[str] = []
    refused = raised = 0

    def emit(i: int) -> bool:
        nonlocal refused, raised
        event = _event(i)
        try:
            taken = tel.emit(event)
        except Exception:  # the SDK promises this never happens
            raised += 1
            return False
        if taken:
            accepted.append(str(event.event_id))
        else:
            refused += 1
        return taken

    # The sender seals the active file only between batches, so while it retries its first
    # batch nothing frees space in the active file: the disk stays full until the ingest is up.
    emit(0)
    if not ingest.refusing.wait(30):
        raise RuntimeError("the sender never tried to send its first batch")
    i = 1
    while emit(i) and i < 100_000:  # until the disk is full
        i += 1
    for more in range(i + 1, i + 21):  # while it stays full
        emit(more)
    full = tel.stats()
    ingest.down = False  # the sender drains the queue, which frees the space
    flushed = tel.flush(timeout_s=30)
    recovered = sum(emit(j) for j in range(i + 1, i + 21))
    flushed = tel.flush(timeout_s=30) and flushed
    closed = tel.close(timeout_s=30)  # False: it dropped events while the disk was full
    after = tel.stats()
    taken = [line["event_id"] for line in ingest.lines]
    counters = json.loads((directory / "q" / "counters.json").read_text())
    return {"accepted": len(accepted), "refused": refused, "raised": raised,
            "recovered": recovered, "full_counted": full.dropped_write_failed,
            "full_persisted": full.counters_persisted, "flushed": flushed, "closed": closed,
            "after_dropped": after.dropped_write_failed,
            "after_persisted": after.counters_persisted, "sent": after.sent,
            "taken_equals_accepted": sorted(taken) == sorted(accepted) == sorted(set(taken)),
            "stored_counters": counters}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], Path(sys.argv[2]))), flush=True)

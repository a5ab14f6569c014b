"""A bounded, crash-safe queue of events on disk.

Each event is one NDJSON line appended (and flushed to the OS) to ``active.ndjson`` before
``put`` returns, so a killed process loses nothing it accepted (``fsync=True`` also survives a
power cut). The sender seals the active file into ``batch-<seq>.ndjson`` and deletes a batch
only after the server has taken responsibility for it. The next process to open the directory
picks up whatever is left. A full queue refuses new events and counts them; the counters persist
in ``counters.json`` so drops are reported even across restarts.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from pathlib import Path
from typing import IO

from harness.sdk.errors import TelemetryError

__all__ = ["DiskQueue"]

_ACTIVE = "active.ndjson"
_COUNTERS = "counters.json"


class DiskQueue:
    def __init__(
        self, directory: Path, max_bytes: int, max_events: int, fsync: bool = False,
    ) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.max_events = max_events
        self._fsync = fsync
        self._mutex = threading.Lock()
        try:
            directory.mkdir(parents=True, exist_ok=True)
            self._lock_file = open(directory / ".lock", "w")
        except OSError as exc:
            raise TelemetryError(f"cannot use queue_dir {directory}: {exc}") from None
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise TelemetryError(
                f"queue_dir {directory} is in use by another live process; give each process "
                "its own queue_dir"
            ) from None
        self.counters: dict[str, int] = self._load_counters()
        self._sizes: dict[Path, tuple[int, int]] = {}  # sealed batch -> (events, bytes)
        self._active: IO[bytes] | None = None
        self._active_events = 0
        self._active_bytes = 0
        self.first_unsealed_s: float | None = None
        self._next_seq = 0
        self._recover()

    # ------------------------------------------------------------------ state on disk

    def _load_counters(self) -> dict[str, int]:
        try:
            loaded = json.loads((self.directory / _COUNTERS).read_text())
            return {str(k): int(v) for k, v in loaded.items()}
        except (OSError, ValueError, AttributeError):
            return {}

    def _save_counters(self) -> None:
        tmp = self.directory / (_COUNTERS + ".tmp")
        tmp.write_text(json.dumps(self.counters))
        os.replace(tmp, self.directory / _COUNTERS)

    def count(self, name: str, n: int = 1) -> None:
        """Add to a persisted counter (drops and the like)."""
        with self._mutex:
            self.counters[name] = self.counters.get(name, 0) + n
            self._save_counters()

    def _recover(self) -> None:
        batches = sorted(self.directory.glob("batch-*.ndjson"))
        if batches:
            self._next_seq = int(batches[-1].stem.split("-")[1]) + 1
        leftover = self.directory / _ACTIVE
        if leftover.exists():
            # A crash can leave half a line at the end; whole lines are kept.
            data = leftover.read_bytes()
            keep = data[:data.rfind(b"\n") + 1]
            if len(keep) < len(data):
                self.count("dropped_torn")
            leftover.write_bytes(keep)
            if keep:
                batches.append(self._rename_active())
            else:
                leftover.unlink()
        for path in batches:
            data = path.read_bytes()
            self._sizes[path] = (data.count(b"\n"), len(data))

    def _rename_active(self) -> Path:
        path = self.directory / f"batch-{self._next_seq:012d}.ndjson"
        self._next_seq += 1
        os.replace(self.directory / _ACTIVE, path)
        return path

    # --------------------------------------------------------------------- operations

    @property
    def pending_events(self) -> int:
        with self._mutex:
            return self._active_events + sum(n for n, _ in self._sizes.values())

    @property
    def unsealed_events(self) -> int:
        return self._active_events

    def _pending_bytes(self) -> int:
        return self._active_bytes + sum(b for _, b in self._sizes.values())

    def put(self, line: bytes) -> bool:
        """Append one event (a JSON document without newlines); False when the queue is full."""
        record = line + b"\n"
        with self._mutex:
            events = self._active_events + sum(n for n, _ in self._sizes.values())
            if events >= self.max_events or self._pending_bytes() + len(record) > self.max_bytes:
                self.counters["dropped_queue_full"] = self.counters.get("dropped_queue_full", 0) + 1
                self._save_counters()
                return False
            if self._active is None:
                self._active = open(self.directory / _ACTIVE, "ab")
                self.first_unsealed_s = time.monotonic()
            self._active.write(record)
            self._active.flush()
            if self._fsync:
                os.fsync(self._active.fileno())
            self._active_events += 1
            self._active_bytes += len(record)
            return True

    def seal(self) -> None:
        """Close the active file into a batch the sender may send."""
        with self._mutex:
            if self._active is None:
                return
            self._active.close()
            self._active = None
            self._sizes[self._rename_active()] = (self._active_events, self._active_bytes)
            self._active_events = self._active_bytes = 0
            self.first_unsealed_s = None

    def sealed(self) -> list[Path]:
        with self._mutex:
            return sorted(self._sizes)

    @staticmethod
    def read(path: Path) -> list[bytes]:
        return [line for line in path.read_bytes().split(b"\n") if line]

    def remove(self, path: Path) -> None:
        with self._mutex:
            self._sizes.pop(path, None)
            path.unlink(missing_ok=True)

    def close(self) -> None:
        with self._mutex:
            if self._active is not None:
                self._active.close()
                self._active = None
            self._lock_file.close()  # releases the flock

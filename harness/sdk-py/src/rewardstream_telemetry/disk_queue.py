"""A bounded, crash-safe queue of events on disk that never raises into its host.

The telemetry SDK keeps what it has not delivered to ingest here, and the gateway what Kafka has
not acknowledged; ``label`` (the prefix of its log lines) and ``dir_option`` (how its host names
the directory setting, in messages) say which.

Each event is one NDJSON line appended (unbuffered, straight to the OS) to ``active.ndjson``
before ``put`` returns, so a killed process loses nothing it accepted (``fsync=True`` also
survives a power cut). The sender seals the active file into ``batch-<seq>.ndjson`` and deletes
a batch only after the server has taken responsibility for it. The next process to open the
directory picks up whatever is left.

``put`` refuses an event (returns False, counts it, logs at most one line per interval) when the
queue is full or the disk refuses the write (full, read-only, over a file-size limit, the
directory gone); a half-written line is cut off again, so the file stays whole lines, and the
next write that works carries on. A directory that cannot be opened at all leaves the queue
unusable (every ``put`` refused) until ``reopen`` succeeds. Counters persist in ``counters.json``
(written at most once a second, and on close); when that file cannot be written they are kept
in memory, ``counters_persisted`` is False and a line says so. ``counted`` holds only what this
process counted (the telemetry client's stats start at zero per client).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import IO

from rewardstream_telemetry.errors import QueueInUseError
from rewardstream_telemetry.throttle import ThrottledLog

__all__ = ["DiskQueue"]

_ACTIVE = "active.ndjson"
_COUNTERS = "counters.json"
_SAVE_EVERY_S = 1.0
_REOPEN_EVERY_S = 1.0


class DiskQueue:
    def __init__(
        self, directory: Path, max_bytes: int, max_events: int, fsync: bool = False, *,
        label: str = "disk queue", dir_option: str = "directory",
        logger: logging.Logger | None = None,
    ) -> None:
        self.directory = directory
        self.label, self.dir_option = label, dir_option
        self.max_bytes = max_bytes
        self.max_events = max_events
        self._fsync = fsync
        self._mutex = threading.RLock()
        self._throttled = ThrottledLog(logger or logging.getLogger(__name__))
        self.counters: dict[str, int] = {}  # since the directory was first used, persisted
        self.counted: dict[str, int] = {}  # by this process only
        self.counters_persisted = True
        self._saved_s = float("-inf")
        self._dirty = False
        self._lock_file: IO[str] | None = None
        self.problem: str | None = None  # why the directory cannot be used, while it cannot
        self._tried_s = float("-inf")
        self._sizes: dict[Path, tuple[int, int]] = {}  # sealed batch -> (events, bytes)
        self._active: IO[bytes] | None = None
        self._active_events = 0
        self._active_bytes = 0  # whole lines in active.ndjson
        self._torn = False  # a failed write may have left part of a line after them
        self.first_unsealed_s: float | None = None
        self._next_seq = 0
        self.reopen()

    # ------------------------------------------------------------------ state on disk

    def reopen(self) -> bool:
        """Open the directory if it is not open yet; True when it is usable.

        Raises :class:`QueueInUseError` only when another live process holds the directory.
        """
        with self._mutex:
            if self._lock_file is not None:
                return True
            self._tried_s = time.monotonic()
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
                lock_file = open(self.directory / ".lock", "w")
            except OSError as exc:
                self._unusable(f"cannot use {self.dir_option} {self.directory}: {exc}")
                return False
            try:
                fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                lock_file.close()
                raise QueueInUseError(
                    f"{self.dir_option} {self.directory} is in use by another live process; "
                    f"give each process its own {self.dir_option}") from None
            try:
                self._recover()
            except OSError as exc:
                lock_file.close()
                self._unusable(f"cannot recover {self.dir_option} {self.directory}: {exc}")
                return False
            self._lock_file, self.problem = lock_file, None
            self._merge_counters()
            return True

    def reopen_if_due(self) -> None:
        if self._lock_file is None and time.monotonic() - self._tried_s >= _REOPEN_EVERY_S:
            self.reopen()

    def _unusable(self, problem: str) -> None:
        self.problem = problem
        self.counters_persisted = False
        self._throttled.log(logging.ERROR, "unusable",
                            "%s: %s; events are dropped and counted until it works",
                            self.label, problem)

    def _merge_counters(self) -> None:
        try:
            loaded = json.loads((self.directory / _COUNTERS).read_text())
            stored = {str(k): int(v) for k, v in loaded.items()}
        except (OSError, ValueError, AttributeError):
            stored = {}
        for name, value in stored.items():
            self.counters[name] = self.counters.get(name, 0) + value
        self._dirty = True
        self.save_counters(force=True)

    def save_counters(self, force: bool = False) -> None:
        """Write the counters if they changed, at most once a second unless ``force``."""
        with self._mutex:
            if not self._dirty or self._lock_file is None:
                return
            if not force and time.monotonic() - self._saved_s < _SAVE_EVERY_S:
                return
            self._saved_s = time.monotonic()
            tmp = self.directory / (_COUNTERS + ".tmp")
            try:
                tmp.write_text(json.dumps(self.counters))
                os.replace(tmp, self.directory / _COUNTERS)
            except OSError as exc:
                self.counters_persisted = False
                self._throttled.log(logging.ERROR, "counters",
                                    "%s: cannot write %s (%s); drop counters are kept in "
                                    "memory only", self.label, self.directory / _COUNTERS, exc)
                return
            self._dirty, self.counters_persisted = False, True

    def count(self, name: str, n: int = 1) -> None:
        """Add to a persisted counter (drops and the like)."""
        with self._mutex:
            self.counters[name] = self.counters.get(name, 0) + n
            self.counted[name] = self.counted.get(name, 0) + n
            self._dirty = True
            self.save_counters()

    def _recover(self) -> None:
        for half_written in self.directory.glob("batch-*.ndjson.tmp"):  # a crashed retain
            half_written.unlink()
        batches = sorted(p for p in self.directory.glob("batch-*.ndjson") if p.is_file())
        if batches:
            self._next_seq = int(batches[-1].stem.split("-")[1]) + 1
        leftover = self.directory / _ACTIVE
        if leftover.exists():
            # A crash can leave half a line at the end; whole lines are kept.
            data = leftover.read_bytes()
            keep = data[:data.rfind(b"\n") + 1]
            if len(keep) < len(data):
                self.count("dropped_torn")
                os.truncate(leftover, len(keep))
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

    def _drop(self, counter: str, why: str, *args: object) -> bool:
        self.count(counter)
        self._throttled.log(logging.WARNING, counter, "%s: " + why + "; %d dropped so far",
                            self.label, *args, self.counters[counter])
        return False

    def put(self, line: bytes) -> bool:
        """Append one event (a JSON document without newlines); False when it was dropped."""
        record = line + b"\n"
        with self._mutex:
            if self._lock_file is None:
                return self._drop("dropped_write_failed", "%s unusable (%s)", self.dir_option,
                                  self.problem)
            events = self._active_events + sum(n for n, _ in self._sizes.values())
            if events >= self.max_events or self._pending_bytes() + len(record) > self.max_bytes:
                return self._drop("dropped_queue_full", "queue %s is full", self.directory)
            try:
                self._append(record)
            except OSError as exc:
                return self._drop("dropped_write_failed", "cannot write to %s (%s)",
                                  self.directory, exc)
            self._active_events += 1
            self._active_bytes += len(record)
            return True

    def _append(self, record: bytes) -> None:
        if self._active is None:
            self._active = open(self.directory / _ACTIVE, "ab", buffering=0)
            self.first_unsealed_s = self.first_unsealed_s or time.monotonic()
        fd = self._active.fileno()
        if self._torn:  # cut off what a failed write left, before anything follows it
            os.ftruncate(fd, self._active_bytes)
            self._torn = False
        try:
            view = memoryview(record)
            while view:
                view = view[os.write(fd, view):]
            if self._fsync:
                os.fsync(fd)
        except OSError:
            self._torn = True
            try:
                os.ftruncate(fd, self._active_bytes)
                self._torn = False
            except OSError:
                pass  # tried again before the next write
            raise

    def seal(self) -> None:
        """Close the active file into a batch the sender may send (raises OSError, and keeps
        the events unsealed, when the rename fails)."""
        with self._mutex:
            if self._active is not None:
                if self._torn:
                    os.ftruncate(self._active.fileno(), self._active_bytes)
                    self._torn = False
                self._active.close()
                self._active = None
            if not self._active_events:
                return
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
            path.unlink(missing_ok=True)
            self._sizes.pop(path, None)

    def retain(self, path: Path, lines: list[bytes]) -> None:
        """Keep only ``lines`` of a sealed batch (the ones not delivered yet), in its place in
        the order; the file is replaced whole, so a crash leaves the old or the new one."""
        if not lines:
            self.remove(path)
            return
        data = b"".join(line + b"\n" for line in lines)
        tmp = path.with_name(path.name + ".tmp")
        with self._mutex:
            tmp.write_bytes(data)
            os.replace(tmp, path)
            self._sizes[path] = (len(lines), len(data))

    def close(self, remove_if_empty: bool = False) -> None:
        """Release the directory; with ``remove_if_empty``, delete it when it holds no event
        and no counter ever counted anything (nothing there is worth keeping)."""
        with self._mutex:
            if self._active is not None:
                self._active.close()
                self._active = None
            empty = (remove_if_empty and self._lock_file is not None and not self.pending_events
                     and not any(self.counters.values()))
            if empty:
                for name in (_ACTIVE, _COUNTERS, ".lock"):  # unlinked while still locked
                    (self.directory / name).unlink(missing_ok=True)
            else:
                self.save_counters(force=True)
            if self._lock_file is not None:
                self._lock_file.close()  # releases the flock
                self._lock_file = None
            if empty:
                try:
                    self.directory.rmdir()
                except OSError:
                    pass  # other files of the host's: the directory is its to keep

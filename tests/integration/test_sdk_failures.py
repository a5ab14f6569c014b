"""The SDK survives its host: a full or unusable disk, a raising transport, 4xx answers and a
server that stays down never raise into the application; every lost event is counted, and
close() answers False once any was."""

from __future__ import annotations

import gzip
import json
import logging
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rewardstream_telemetry import Request, Response, Telemetry, TelemetryError, Trajectory
from rewardstream_telemetry.disk_queue import DiskQueue
from tests.support.required import unavailable

pytestmark = pytest.mark.slow

TRAJ = Trajectory("traj-f", "session-f", "user-1", "ckpt-0")
_CHILD = str(Path(__file__).parents[1] / "support" / "sdk_disk_child.py")
_OK = {"accepted": ["x"], "duplicates": [], "rejected": []}


def _taking(seen: list[bytes] | None = None, answers: list | None = None):
    """A transport answering from ``answers`` (a status, a Response or an exception to raise)
    in turn, then 200 for every event; the bodies it took go to ``seen``."""
    pending = list(answers or [])

    def answer(request: Request) -> Response:
        if pending:
            next_answer = pending.pop(0)
            if isinstance(next_answer, Exception):
                raise next_answer
            if isinstance(next_answer, int):
                return Response.of_json(next_answer, {"detail": "no"})
            return next_answer
        lines = gzip.decompress(request.body).splitlines()
        if seen is not None:
            seen.extend(lines)
        return Response.of_json(200, {"accepted": ["x"] * len(lines), "duplicates": [],
                                      "rejected": []})
    return answer


def _counting(status: int, attempts: list[float], **headers: str):
    def answer(request: Request) -> Response:
        attempts.append(time.monotonic())
        return Response(status, b"no", headers)
    return answer


@pytest.mark.parametrize("mode", ["tmpfs", "fsize"])
def test_a_full_disk_drops_and_counts_then_recovers_when_space_is_back(mode: str,
                                                                       tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, _CHILD, mode, str(tmp_path)], capture_output=True,
                         text=True, timeout=180)
    if mode == "tmpfs" and run.returncode != 0 and ("unshare" in run.stderr
                                                     or "mount" in run.stderr):
        unavailable(f"cannot mount a small tmpfs here: {run.stderr.splitlines()[-1]}")
    assert run.returncode == 0, run.stderr[-2000:]
    seen = json.loads(run.stdout)
    assert seen["raised"] == 0 and seen["accepted"] > 20
    assert seen["refused"] == seen["full_counted"] == 21  # the first refusal and 20 more
    assert seen["recovered"] == 20 and seen["flushed"]  # space back: taken and sent again
    assert not seen["closed"]  # close() says events were lost
    assert seen["taken_equals_accepted"]  # no torn line, nothing lost, nothing sent twice
    assert seen["stored_counters"]["dropped_write_failed"] == 21 and seen["after_persisted"]
    assert run.stderr.count("telemetry: cannot write to") == 1  # one line, not one per event


def test_an_unusable_queue_dir_is_survived_and_used_once_it_works(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    queue_dir = tmp_path / "q"
    queue_dir.write_text("a file where the directory should be")
    seen: list[bytes] = []
    with caplog.at_level(logging.WARNING, logger="rewardstream.sdk"):
        tel = Telemetry("http://ingest.invalid", "k", queue_dir=queue_dir, linger_s=0.05,
                        transport=_taking(seen))
        for _ in range(3):
            tel.followup_sent(TRAJ, sentiment="neutral")  # no exception: dropped and counted
    stats = tel.stats()
    assert stats.dropped_write_failed == 3 and not stats.counters_persisted
    said = [r.getMessage() for r in caplog.records]  # one line on the directory, one on drops
    assert len(said) == 2 and "cannot use queue_dir" in said[0] and "1 dropped" in said[1]
    queue_dir.unlink()
    queue_dir.mkdir()
    deadline = time.monotonic() + 10
    refused_meanwhile = 0
    while time.monotonic() < deadline:
        before = tel.stats().dropped_write_failed
        tel.followup_sent(TRAJ, sentiment="satisfied")
        if tel.stats().dropped_write_failed == before:
            break
        refused_meanwhile += 1
        time.sleep(0.05)
    assert not tel.close(timeout_s=10) and len(seen) == 1  # False: it dropped events
    stored = json.loads((queue_dir / "counters.json").read_text())
    assert stored["dropped_write_failed"] == 3 + refused_meanwhile
    assert tel.stats().counters_persisted


def test_counters_that_cannot_be_written_are_kept_in_memory_and_said_so(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "counters.json.tmp").mkdir()  # a directory where the file is written
    with caplog.at_level(logging.WARNING, logger="rewardstream.sdk"):
        queue = DiskQueue(tmp_path, max_bytes=1 << 20, max_events=1)
        assert [queue.put(b"{}") for _ in range(50)] == [True] + [False] * 49
    assert queue.counters["dropped_queue_full"] == 49 and not queue.counters_persisted
    said = [r.getMessage() for r in caplog.records]
    assert sum("kept in memory only" in m for m in said) == 1
    assert sum("is full" in m for m in said) == 1
    (tmp_path / "counters.json.tmp").rmdir()
    queue.close()
    assert queue.counters_persisted
    assert DiskQueue(tmp_path, 1 << 20, 1).counters["dropped_queue_full"] == 49


def test_the_sender_outlives_a_failing_rename_and_a_raising_transport(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    seen: list[bytes] = []
    answers = [RuntimeError("a bug in a transport"), ConnectionRefusedError("refused")]
    tel = Telemetry("http://ingest.invalid", "k", queue_dir=tmp_path, linger_s=0.05,
                    backoff_base_s=0.01, transport=_taking(seen, answers))
    blocker = tmp_path / "batch-000000000000.ndjson"  # where the first seal renames to
    blocker.mkdir()
    (blocker / "x").write_text("makes the rename fail")
    with caplog.at_level(logging.ERROR, logger="rewardstream.sdk"):
        for i in range(5):
            tel.edit_decided(TRAJ, edit_id=f"e{i}", decision="accepted")
        assert tel.flush(timeout_s=20)
    assert any("sending from" in r.getMessage() and r.exc_info for r in caplog.records)
    tel.edit_decided(TRAJ, edit_id="e5", decision="rejected")  # still sending afterwards
    assert tel.close(timeout_s=10)
    ids = sorted(json.loads(line)["payload"]["edit_id"] for line in seen)
    assert ids == [f"e{i}" for i in range(6)] and tel.stats().retries == 2


@pytest.mark.parametrize("answer", [400, 401, 404, 409, 422,
                                    Response(403, b"<html>forbidden</html>")],
                         ids=["400", "401", "404", "409", "422", "403-not-ingest"])
def test_4xx_is_never_retried_and_counted_as_undeliverable(answer: int | Response,
                                                           tmp_path: Path) -> None:
    attempts: list[int] = []

    def once(request: Request) -> Response:
        attempts.append(1)
        if isinstance(answer, Response):
            return answer
        return Response(answer, b"no")

    tel = Telemetry("http://ingest.invalid", "k", queue_dir=tmp_path, linger_s=10,
                    transport=once)
    for i in range(3):
        tel.edit_decided(TRAJ, edit_id=f"e{i}", decision="accepted")
    assert not tel.close(timeout_s=10) and tel.stats().queued == 0
    assert len(attempts) == 1 and tel.stats().retries == 0
    assert DiskQueue(tmp_path, 1 << 20, 10).counters["dropped_undeliverable"] == 3


def test_a_single_event_over_the_size_cap_is_dropped_not_looped(tmp_path: Path) -> None:
    attempts: list[float] = []
    tel = Telemetry("http://ingest.invalid", "k", queue_dir=tmp_path,
                    transport=_counting(413, attempts))
    tel.trajectory_ended(TRAJ, outcome="completed", turns=2)
    assert not tel.close(timeout_s=10) and tel.stats().queued == 0
    assert len(attempts) == 1 and tel.stats().dropped_undeliverable == 1


def test_retries_stop_after_the_attempt_budget_and_count_what_was_given_up(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    attempts: list[float] = []
    tel = Telemetry("http://ingest.invalid", "k", queue_dir=tmp_path, linger_s=10,
                    backoff_base_s=0.01, backoff_cap_s=0.02, retry_max_attempts=4,
                    transport=_counting(503, attempts))
    tel.followup_sent(TRAJ, sentiment="dissatisfied")
    tel.followup_sent(TRAJ, sentiment="neutral")
    with caplog.at_level(logging.WARNING, logger="rewardstream.sdk"):
        assert not tel.close(timeout_s=10)
    stats = tel.stats()
    assert len(attempts) == 4 and stats.retries == 3
    assert stats.dropped_gave_up == 2 and stats.queued == 0
    assert DiskQueue(tmp_path, 1 << 20, 10).counters["dropped_gave_up"] == 2
    assert any("retry budget (4 attempts" in r.getMessage() for r in caplog.records)


def test_a_retry_after_beyond_the_time_budget_gives_up_without_waiting(tmp_path: Path) -> None:
    attempts: list[float] = []
    too_late = _counting(429, attempts, **{"Retry-After": "5"})
    tel = Telemetry("http://ingest.invalid", "k", queue_dir=tmp_path, linger_s=10,
                    retry_budget_s=1.0, transport=too_late)
    tel.followup_sent(TRAJ, sentiment="neutral")
    started = time.monotonic()
    assert not tel.close(timeout_s=10) and tel.stats().queued == 0
    assert len(attempts) == 1 and time.monotonic() - started < 4
    assert tel.stats().dropped_gave_up == 1


def test_retries_back_off_with_jitter_within_the_budget(tmp_path: Path) -> None:
    attempts: list[float] = []
    tel = Telemetry("http://ingest.invalid", "k", queue_dir=tmp_path, linger_s=10,
                    backoff_base_s=0.2, backoff_cap_s=0.8, retry_max_attempts=5,
                    transport=_counting(500, attempts))
    tel.followup_sent(TRAJ, sentiment="neutral")
    assert not tel.close(timeout_s=20) and tel.stats().queued == 0
    gaps = [b - a for a, b in zip(attempts, attempts[1:], strict=False)]
    # Equal jitter: each wait is between half and all of min(cap, base * 2^n) (the schedule is
    # checked exactly in test_sdk_retry). Real waits are never shorter than its floor, and come
    # within a generous 2 s of its ceiling however busy the machine.
    for n, gap in enumerate(gaps):
        ceiling = min(0.8, 0.2 * 2 ** n)
        assert ceiling / 2 - 0.01 <= gap <= ceiling + 2.0
    assert len(gaps) == 4


def test_a_damaged_line_in_the_queue_is_counted_and_the_rest_sent(tmp_path: Path) -> None:
    attempts: list[float] = []
    down = Telemetry("http://ingest.invalid", "k", queue_dir=tmp_path, linger_s=10,
                     backoff_base_s=0.01, transport=_counting(503, attempts))
    for i in range(3):
        down.edit_decided(TRAJ, edit_id=f"e{i}", decision="accepted")
    assert not down.close(timeout_s=0.5)  # gave up for now: the events stay on disk
    [batch] = sorted(tmp_path.glob("batch-*.ndjson"))
    lines = batch.read_bytes().splitlines()
    batch.write_bytes(b"\n".join([lines[0], b'{"event_id": "cut sh', *lines[1:]]) + b"\n")
    seen: list[bytes] = []
    tel = Telemetry("http://ingest.invalid", "k", queue_dir=tmp_path,
                    transport=_taking(seen))
    assert not tel.close(timeout_s=10) and tel.stats().queued == 0
    assert sorted(json.loads(line)["payload"]["edit_id"] for line in seen) == ["e0", "e1", "e2"]
    assert tel.stats().dropped_torn == 1


def test_a_dead_replica_sends_the_sdk_on_to_the_next_and_it_stays_there(tmp_path: Path) -> None:
    hosts: list[str] = []

    def answer(request: Request) -> Response:
        hosts.append(request.host)
        if request.host == "ingest-a.invalid":
            raise ConnectionRefusedError("connection refused")
        lines = gzip.decompress(request.body).splitlines()
        return Response.of_json(200, {"accepted": ["x"] * len(lines), "duplicates": [],
                                      "rejected": []})

    tel = Telemetry(["http://ingest-a.invalid", "http://ingest-b.invalid/v1/events"], "k",
                    queue_dir=tmp_path, batch_size=1, backoff_base_s=0.01, backoff_cap_s=0.02,
                    transport=answer)
    for turn in range(3):
        tel.followup_sent(TRAJ, sentiment="neutral")
        assert tel.flush(timeout_s=10), turn
    assert tel.close(timeout_s=10)
    stats = tel.stats()
    assert hosts == ["ingest-a.invalid"] + ["ingest-b.invalid"] * 3
    assert (stats.sent, stats.retries, stats.failovers) == (3, 1, 1)


def test_an_empty_list_of_endpoints_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TelemetryError, match="endpoint_url"):
        Telemetry([], "k", queue_dir=tmp_path)

"""The SDK without a broker: what importing it loads, the disk queue's recovery and bounds,
Retry-After."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from rewardstream_telemetry import (
    QueueInUseError,
    Request,
    Response,
    Telemetry,
    TelemetryError,
    Trajectory,
)
from rewardstream_telemetry.disk_queue import DiskQueue

pytestmark = pytest.mark.slow

TRAJ = Trajectory("traj-1", "session-1", "user-1", "ckpt-0")


def test_importing_the_sdk_imports_nothing_of_the_platform_and_no_http_library() -> None:
    code = ("import sys, rewardstream_telemetry; heavy = [m for m in ('fastapi', 'starlette', "
            "'torch', 'uvicorn', 'httpx', 'pydantic', 'schemas', 'infra', 'harness') "
            "if m in sys.modules]; print(heavy); sys.exit(1 if heavy else 0)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_queue_recovers_whole_lines_and_counts_a_torn_one(tmp_path: Path) -> None:
    queue = DiskQueue(tmp_path, max_bytes=1 << 20, max_events=100)
    assert queue.put(b'{"a":1}') and queue.put(b'{"a":2}')
    queue.seal()
    assert queue.put(b'{"a":3}')
    queue.close()
    with open(tmp_path / "active.ndjson", "ab") as active:
        active.write(b'{"a":4')  # a write cut short by a crash
    reopened = DiskQueue(tmp_path, max_bytes=1 << 20, max_events=100)
    assert reopened.pending_events == 3
    lines = [line for path in reopened.sealed() for line in reopened.read(path)]
    assert lines == [b'{"a":1}', b'{"a":2}', b'{"a":3}']
    assert reopened.counters["dropped_torn"] == 1
    assert reopened.put(b'{"a":5}')
    reopened.seal()
    assert reopened.sealed()[-1].name > reopened.sealed()[0].name  # order kept across restarts


def test_queue_is_bounded_and_counts_drops_persistently(tmp_path: Path) -> None:
    queue = DiskQueue(tmp_path, max_bytes=1 << 20, max_events=2)
    assert [queue.put(b"{}") for _ in range(4)] == [True, True, False, False]
    queue.close()
    assert DiskQueue(tmp_path, 1 << 20, 2).counters["dropped_queue_full"] == 2


def test_one_queue_dir_per_live_process(tmp_path: Path) -> None:
    held = DiskQueue(tmp_path, 1 << 20, 10)
    with pytest.raises(QueueInUseError, match="in use"):
        DiskQueue(tmp_path, 1 << 20, 10)
    with pytest.raises(TelemetryError, match="queue_dir .* is in use"):
        Telemetry("http://ingest.invalid", "k", queue_dir=tmp_path)
    held.close()
    DiskQueue(tmp_path, 1 << 20, 10)  # free again once the holder closes


def test_client_waits_for_retry_after_then_resends_the_same_events(tmp_path: Path) -> None:
    attempts: list[tuple[float, bytes]] = []

    def answer(request: Request) -> Response:
        attempts.append((time.monotonic(), request.body))
        if len(attempts) == 1:
            return Response.of_json(503, headers={"Retry-After": "1"}, value={"detail": "down"})
        return Response.of_json(200, {"accepted": ["x"], "duplicates": [], "rejected": []})

    tel = Telemetry("http://ingest.invalid", "k", queue_dir=tmp_path, backoff_base_s=0.01,
                    transport=answer)
    tel.followup_sent(TRAJ, sentiment="dissatisfied")
    assert tel.flush(timeout_s=10)
    tel.close()
    assert len(attempts) == 2 and attempts[1][0] - attempts[0][0] >= 1.0
    stats = tel.stats()
    assert (stats.sent, stats.retries, stats.queued) == (1, 1, 0)


def test_oversize_batches_are_split_until_they_fit(tmp_path: Path) -> None:
    sizes: list[int] = []

    def answer(request: Request) -> Response:
        import gzip

        count = gzip.decompress(request.body).count(b"\n") + 1
        sizes.append(count)
        if count > 2:
            return Response.of_json(413, {"detail": "too large"})
        return Response.of_json(200, {"accepted": ["x"] * count, "duplicates": [],
                                      "rejected": []})

    tel = Telemetry("http://ingest.invalid", "k", queue_dir=tmp_path, linger_s=10,
                    transport=answer)
    for i in range(5):
        tel.edit_decided(TRAJ, edit_id=f"e{i}", decision="accepted")
    assert tel.close(timeout_s=10)
    assert sizes[0] == 5 and sum(n for n in sizes if n <= 2) == 5 and tel.stats().sent == 5


def test_usable_from_asyncio(tmp_path: Path) -> None:
    import asyncio

    bodies: list[bytes] = []

    def answer(request: Request) -> Response:
        bodies.append(request.body)
        return Response.of_json(200, {"accepted": ["x"], "duplicates": [], "rejected": []})

    async def main() -> bool:
        async with Telemetry("http://ingest.invalid", "k", queue_dir=tmp_path,
                             transport=answer) as tel:
            tel.trajectory_ended(TRAJ, outcome="aborted", turns=1)
            return await tel.aflush(timeout_s=10)

    assert asyncio.run(main()) and len(bodies) == 1


def test_close_is_false_once_events_were_lost_and_each_client_counts_from_zero(
        tmp_path: Path) -> None:
    def refuse(request: Request) -> Response:
        return Response.of_json(401, {"detail": "unknown key"})

    first = Telemetry("http://ingest.invalid", "k", queue_dir=tmp_path, transport=refuse)
    for i in range(3):
        first.edit_decided(TRAJ, edit_id=f"e{i}", decision="accepted")
    assert first.close(timeout_s=10) is False  # sent, refused for good: lost
    assert (first.stats().queued, first.stats().dropped_undeliverable, first.stats().lost) == \
        (0, 3, 3)
    assert first.close() is False  # closing again answers the same

    def take(request: Request) -> Response:
        return Response.of_json(200, {"accepted": ["x"], "duplicates": [], "rejected": []})

    second = Telemetry("http://ingest.invalid", "k", queue_dir=tmp_path, transport=take)
    assert second.stats().dropped_undeliverable == 0  # this client's own counts
    second.edit_decided(TRAJ, edit_id="e3", decision="accepted")
    assert second.close(timeout_s=10) is True
    assert (second.stats().sent, second.stats().lost) == (1, 0)
    assert DiskQueue(tmp_path, 1 << 20, 10).counters["dropped_undeliverable"] == 3  # the sum


def test_events_ingest_rejects_make_close_false(tmp_path: Path) -> None:
    def reject(request: Request) -> Response:
        return Response.of_json(403, {"accepted": [], "duplicates": [], "rejected": [
            {"event_id": "x", "field": "type", "reason": "not allowed for this key"}]})

    tel = Telemetry("http://ingest.invalid", "k", queue_dir=tmp_path, transport=reject)
    tel.followup_sent(TRAJ, sentiment="neutral")
    assert tel.close(timeout_s=10) is False
    assert (tel.stats().rejected, tel.stats().queued, tel.stats().retries) == (1, 0, 0)

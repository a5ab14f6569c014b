"""The gateway's spool on a real disk with a scripted sender: order, retries, losses, restarts.

The sender stands in for Kafka's answers only; the Kafka side is tested against a real broker in
tests/integration/test_gateway_spool_outage.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

from infra.backoff import retry_pause_s
from serving.gateway.spool import EventSpool, Outcome
from tests.support.metrics import sample_sum
from tests.support.waits import wait_for


class ScriptedKafka:
    """Acknowledges what ``answer(line, attempt)`` says; records every line it was sent."""

    def __init__(self, answer: Callable[[bytes, int], Outcome]) -> None:
        self.answer = answer
        self.sent: list[bytes] = []
        self.acknowledged: list[bytes] = []
        self.attempts: dict[bytes, int] = {}
        self.lock = threading.Lock()

    def __call__(self, lines: list[bytes], gave_up: Callable[[], bool]) -> list[Outcome]:
        out = []
        with self.lock:
            for line in lines:
                attempt = self.attempts.get(line, 0)
                self.attempts[line] = attempt + 1
                self.sent.append(line)
                outcome = self.answer(line, attempt)
                if outcome is Outcome.ACKNOWLEDGED:
                    self.acknowledged.append(line)
                out.append(outcome)
        return out


def _spool(tmp_path: Path, kafka: ScriptedKafka, **kw: int) -> tuple[EventSpool, CollectorRegistry]:
    registry = CollectorRegistry()
    spool = EventSpool(tmp_path / "spool", kafka, registry, max_bytes=kw.get("max_bytes", 1 << 20),
                       max_events=kw.get("max_events", 10_000), linger_s=0.01,
                       backoff_s=(0.02, 0.05))
    return spool, registry


def _wait(condition: Callable[[], object]) -> None:
    wait_for(condition, 10, "the spool", interval_s=0.01)


def _metric(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return sample_sum(generate_latest(registry).decode(), name, **labels)


def test_an_outage_delays_events_in_order_and_loses_none(tmp_path: Path) -> None:
    broker_back = threading.Event()
    kafka = ScriptedKafka(lambda _line, _attempt: Outcome.ACKNOWLEDGED if broker_back.is_set()
                          else Outcome.RETRY)
    spool, registry = _spool(tmp_path, kafka)
    lines = [b'{"n":%d}' % i for i in range(300)]
    for line in lines[:100]:
        assert spool.put(line)
        time.sleep(0.0005)
    _wait(lambda: len(kafka.sent) > 0)
    for line in lines[100:]:
        assert spool.put(line)  # still taken while nothing is acknowledged
    assert _metric(registry, "rewardstream_gateway_spool_events") == 300
    broker_back.set()
    _wait(lambda: spool.pending_events == 0)
    assert kafka.acknowledged == lines  # every one, once, in the order served
    assert _metric(registry, "rewardstream_gateway_events_delivered_total") == 300
    assert _metric(registry, "rewardstream_gateway_events_retried_total") > 0
    assert spool.close(1.0) and spool.lost == {}


def test_only_the_unacknowledged_part_of_a_batch_is_sent_again(tmp_path: Path) -> None:
    # Odd events are acknowledged at once, even ones on their second attempt.
    kafka = ScriptedKafka(lambda line, attempt: Outcome.ACKNOWLEDGED
                          if int(line[5:-1]) % 2 or attempt else Outcome.RETRY)
    spool, _ = _spool(tmp_path, kafka)
    lines = [b'{"n":%d}' % i for i in range(40)]
    for line in lines:
        spool.put(line)
    _wait(lambda: spool.pending_events == 0)
    assert sorted(kafka.acknowledged) == sorted(lines) and len(kafka.acknowledged) == 40
    assert all(kafka.attempts[line] == (2 if i % 2 == 0 else 1) for i, line in enumerate(lines))
    spool.close(1.0)


def test_refused_events_and_a_full_spool_are_counted_as_lost(tmp_path: Path) -> None:
    hold = threading.Event()
    kafka = ScriptedKafka(lambda line, _: Outcome.REFUSED if b"huge" in line else
                          Outcome.ACKNOWLEDGED if hold.is_set() else Outcome.RETRY)
    spool, registry = _spool(tmp_path, kafka, max_events=3)
    assert [spool.put(b'{"n":%d}' % i) for i in range(5)] == [True, True, True, False, False]
    hold.set()
    _wait(lambda: spool.pending_events == 0)
    assert spool.put(b'{"huge":1}')
    _wait(lambda: spool.lost.get("refused") == 1)
    assert spool.lost == {"queue_full": 2, "refused": 1}
    assert _metric(registry, "rewardstream_gateway_events_lost_total", reason="queue_full") == 2
    assert _metric(registry, "rewardstream_gateway_events_lost_total", reason="refused") == 1
    spool.close(1.0)


def test_what_is_not_delivered_by_close_is_delivered_after_a_restart(tmp_path: Path) -> None:
    down = ScriptedKafka(lambda _line, _attempt: Outcome.RETRY)
    spool, _ = _spool(tmp_path, down)
    lines = [b'{"n":%d}' % i for i in range(25)]
    for line in lines:
        spool.put(line)
    began = time.monotonic()
    assert spool.close(0.3) is False
    assert time.monotonic() - began < 3.0  # close gives up on a broker that does not answer
    # ... after retrying at its backoff (0.02 s doubling to 0.05 s), not in a busy loop
    assert len(down.sent) <= 25 * 20
    up = ScriptedKafka(lambda _line, _attempt: Outcome.ACKNOWLEDGED)
    restarted, _ = _spool(tmp_path, up)
    _wait(lambda: restarted.pending_events == 0)
    assert up.acknowledged == lines
    restarted.close(1.0)


def test_a_spool_closed_empty_leaves_no_directory_one_with_losses_keeps_its_counts(
        tmp_path: Path) -> None:
    kafka = ScriptedKafka(lambda _line, _attempt: Outcome.ACKNOWLEDGED)
    spool, _ = _spool(tmp_path, kafka)
    spool.put(b'{"n":1}')
    _wait(lambda: spool.pending_events == 0)
    assert spool.close(1.0) and not (tmp_path / "spool").exists()
    refusing = ScriptedKafka(lambda _line, _attempt: Outcome.REFUSED)
    spool, _ = _spool(tmp_path, refusing)
    spool.put(b'{"n":2}')
    _wait(lambda: spool.lost.get("refused") == 1)
    spool.close(1.0)
    reopened, _ = _spool(tmp_path, kafka)
    assert reopened.lost == {"refused": 1}  # a loss is counted across restarts
    reopened.close(1.0)


def test_batches_stay_small_while_kafka_is_away(tmp_path: Path) -> None:
    back = threading.Event()
    kafka = ScriptedKafka(lambda _line, _attempt: Outcome.ACKNOWLEDGED if back.is_set()
                          else Outcome.RETRY)
    sizes: list[int] = []

    def deliver(lines: list[bytes], gave_up: Callable[[], bool]) -> list[Outcome]:
        sizes.append(len(lines))
        return kafka(lines, gave_up)

    registry = CollectorRegistry()
    spool = EventSpool(tmp_path, deliver, registry, max_bytes=1 << 24, max_events=10_000,
                       linger_s=0.01, backoff_s=(0.02, 0.05))
    lines = [b'{"n":%d}' % i for i in range(1700)]
    for line in lines:
        spool.put(line)
    back.set()
    _wait(lambda: spool.pending_events == 0)
    assert kafka.acknowledged == lines and max(sizes) <= 500
    spool.close(1.0)


def test_the_retry_pause_doubles_to_its_ceiling_and_survives_any_number_of_failures() -> None:
    assert [retry_pause_s(n, 0.5, 5.0) for n in (1, 2, 3, 4, 5)] == [0.5, 1.0, 2.0, 4.0, 5.0]
    # an outage of days at 5 s a round: the exponent must not overflow a float
    assert retry_pause_s(200_000, 0.5, 5.0) == 5.0

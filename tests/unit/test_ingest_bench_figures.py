"""The ingest benchmark's figures: CPU per event counts the server's CPU for HTTP, the summary
spans every figure of every run, and a process's CPU seconds grow while it works."""

from __future__ import annotations

import os
import time

import pytest

from bench.ingest_run import PATHS, _row, _summary
from serving.ingest.process import IngestProcess


def test_http_cpu_per_event_adds_the_server_cpu_to_the_clients() -> None:
    latencies_s = [0.001 * i for i in range(1, 101)]
    producer = _row(1000, (2.0, 0.5, latencies_s))
    http = _row(1000, (2.0, 0.5, latencies_s), server_cpu_s=1.5)
    assert producer["events_per_s"] == 500
    assert producer["cpu_us_per_event"] == pytest.approx(500)
    assert "server_cpu_us_per_event" not in producer
    assert http["cpu_us_per_event"] == pytest.approx(2000)
    assert http["server_cpu_us_per_event"] == pytest.approx(1500)
    assert http["p50_ms"] == pytest.approx(50.5) and http["p99_ms"] == pytest.approx(99.01)


def test_summary_spans_each_figure_and_both_ratios_over_the_runs() -> None:
    def run(rate: float, cpu_ratio: float) -> dict[str, object]:
        row: dict[str, object] = {path: {"events_per_s": rate, "cpu_us_per_event": 10.0}
                                  for path in PATHS}
        row |= {"load_avg_1m": rate / 1000}
        for baseline in PATHS[1:]:
            row |= {f"ratio_to_{baseline}": rate / 1000, f"cpu_ratio_to_{baseline}": cpu_ratio}
        return row

    summary = _summary([run(1000, 0.4), run(3000, 0.6)])
    assert summary["http"]["events_per_s"] == {"min": 1000, "max": 3000}
    assert summary["aiokafka"]["cpu_us_per_event"] == {"min": 10.0, "max": 10.0}
    assert summary["cpu_ratio_to_aiokafka"] == {"min": 0.4, "max": 0.6}
    assert summary["ratio_to_kafka_python"] == {"min": 1.0, "max": 3.0}
    assert summary["load_avg_1m"] == {"min": 1.0, "max": 3.0}


def test_cpu_seconds_of_a_process_grow_while_it_computes() -> None:
    process = IngestProcess(url="", pid=os.getpid())
    before_s = process.cpu_s()
    deadline = time.process_time() + 0.2
    while time.process_time() < deadline:
        sum(range(1000))
    assert process.cpu_s() - before_s >= 0.1

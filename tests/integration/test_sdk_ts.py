"""The TypeScript SDK (harness/sdk-ts): its Node unit tests, its Node tests against the real
ingest and broker (N events, a SIGKILL'd client, a broker outage) checked against what lands on
``events.raw``, and parity with the Python SDK field by field."""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from infra import broker
from infra.settings import Settings
from rewardstream_telemetry import Telemetry, Trajectory
from tests.support.ingest_support import TEST_KEY, ingest_config, read_topic, running_server
from tests.support.metrics import metric
from tests.support.sdk_ts_support import (
    SDK_TS,
    build_sdk_ts,
    node_test_command,
    read_node_run,
    run_node,
    run_node_tests,
)
from tests.support.waits import wait_for

pytestmark = pytest.mark.slow

_INGEST_TESTS = ["test/integration/ingest.test.js", "test/integration/crash.test.js"]
_OUTAGE_TEST = "test/integration/outage.test.js"


@pytest.fixture(scope="module")
def node() -> str:
    return build_sdk_ts()


def _node_env(url: str, results_dir: Path) -> dict[str, str]:
    results_dir.mkdir(exist_ok=True)
    return {"RS_INGEST_URL": url, "RS_INGEST_KEY": TEST_KEY, "RS_RESULTS_DIR": str(results_dir)}


def _each_once_on_the_log(settings: Settings, sent: list[str]) -> dict[str, Any]:
    """The records of events.raw by event id, after checking they are ``sent``, each once."""
    records = [json.loads(r.value) for r in read_topic(settings, "events.raw")]
    on_log = Counter(r["event_id"] for r in records)
    assert set(on_log) == set(sent), (len(on_log), len(sent))
    assert max(on_log.values()) == 1, [i for i, n in on_log.items() if n > 1][:5]
    return {r["event_id"]: r for r in records}


def test_typescript_sdk_unit_tests_pass(node: str) -> None:
    run = run_node_tests(node, ["test/unit/"])
    assert run.counts["fail"] == 0 and run.counts["skipped"] == 0, run.output
    assert run.counts["pass"] >= 40, run.counts  # every suite ran, none was left out


@pytest.mark.kafka
def test_typescript_sdk_delivers_each_event_once_through_real_ingest(
    kafka: Settings, node: str, tmp_path: Path,
) -> None:
    results = tmp_path / "results"
    with running_server(kafka) as server:
        run = run_node_tests(node, _INGEST_TESTS, results, _node_env(server.url, results))
    assert run.counts["pass"] == 2 and run.counts["skipped"] == 0, run.output
    n_events, killed = run.results["n-events"], run.results["killed-process"]
    on_log = _each_once_on_the_log(kafka, n_events["ids"] + killed["ids"])
    assert len(n_events["ids"]) == n_events["stats"]["sent"] == 2000
    assert len(killed["ids"]) == killed["stats"]["sent"] == 40
    assert {r["org_id"] for r in on_log.values()} == {"org-test"}
    print(f"typescript sdk: {len(n_events['ids'])} sent, {len(killed['ids'])} queued by a "
          f"killed process and sent by the next; {len(on_log)} on events.raw, each once")


def _until_written(path: Path, tests: subprocess.Popen[str], timeout_s: float) -> None:
    wait_for(path.exists, timeout_s, f"the node test to write {path.name}",
             alive=lambda: tests.poll() is None)


@pytest.mark.kafka
def test_typescript_sdk_delivers_every_event_after_a_broker_outage(
    node: str, outage_broker: Settings, tmp_path: Path,
) -> None:
    control, results = tmp_path / "control", tmp_path / "results"
    control.mkdir()
    config = ingest_config(ack_timeout_s=1.5, unavailable_retry_after_s=1)
    with running_server(outage_broker, config) as server:
        env = {**os.environ, **_node_env(server.url, results),
               "RS_OUTAGE_CONTROL_DIR": str(control)}
        tests = subprocess.Popen(
            node_test_command(node, [_OUTAGE_TEST], test_timeout_s=300), cwd=SDK_TS,
            env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            _until_written(control / "phase1-sent", tests, 60)
            broker.stop(outage_broker)
            (control / "broker-stopped").touch()
            _until_written(control / "retrying", tests, 90)
            assert metric(server.url, "rewardstream_ingest_requests_total", status="503") > 0
            broker.start(outage_broker)
            output, _ = tests.communicate(timeout=180)
        finally:
            if tests.poll() is None:
                tests.kill()
    assert tests.returncode == 0, output
    run = read_node_run(output, results)
    assert run.counts["pass"] == 1, output
    outage = run.results["broker-outage"]
    _each_once_on_the_log(outage_broker, outage["ids"])
    assert outage["stats"]["retries"] > 0
    print(f"typescript sdk, broker outage: {len(outage['ids'])} sent, "
          f"{outage['stats']['retries']} retries, each once on events.raw")


# One trajectory both producers send: every type, explicit values and defaults left out.
_TRAJECTORY = {"trajectory_id": "traj-parity", "session_id": "session-parity",
               "user": "user-parity", "checkpoint_id": "ckpt-parity", "arm": "treatment"}
_EVENTS: list[tuple[str, dict[str, Any]]] = [
    ("completion.served", {"completion_id": "c1", "model": "tiny-lora-3",
                           "prompt_token_ids": [5, 6, 7], "completion_token_ids": [8, 9],
                           "behaviour_logprobs": [-0.25, -1.5], "ttft_ms": 12.0,
                           "latency_ms": 80.5, "sampling": {"temperature": 0.7, "seed": 3},
                           "finish_reason": "length"}),
    ("completion.served", {"completion_id": "c2", "model": "tiny", "prompt_token_ids": [],
                           "completion_token_ids": [], "behaviour_logprobs": [],
                           "ttft_ms": 0.0, "latency_ms": 1.0}),
    ("tool.called", {"call_id": "t1", "tool": "edit_file", "valid": False,
                     "error_kind": "bad_arguments", "duration_ms": 3.5, "parallel_group": 2}),
    ("tool.called", {"call_id": "t2", "tool": "read_file", "valid": True}),
    ("edit.proposed", {"edit_id": "e1", "path": "src/app.py", "lines_added": 3,
                       "lines_removed": 1}),
    ("edit.decided", {"edit_id": "e1", "decision": "reverted"}),
    ("edit.persistence", {"edit_id": "e1", "horizon_s": 3600, "surviving_fraction": 0.25}),
    ("followup.sent", {"sentiment": "dissatisfied"}),
    ("clarification.asked", {"request_ambiguity": 0.75}),
    ("clarification.asked", {}),
    ("trajectory.ended", {"outcome": "aborted", "turns": 4, "task_family": "off-by-one"}),
]
# Made by the client or at ingest per event: they differ between any two sends.
_PER_SEND = {"event_id", "occurred_at", "sent_at", "received_at", "event_time", "clock_skew_ms"}


def _python_producer(url: str, queue_dir: Path) -> list[str]:
    trajectory = Trajectory(**_TRAJECTORY)
    ids = []
    with Telemetry(url, TEST_KEY, queue_dir=queue_dir, linger_s=0.02) as tel:
        for event_type, payload in _EVENTS:
            ids.append(str(getattr(tel, event_type.replace(".", "_"))(trajectory, **payload)))
        assert tel.flush(timeout_s=30)
    return ids


def _typescript_producer(node: str, url: str, tmp_path: Path) -> list[str]:
    script = tmp_path / "trajectory.json"
    script.write_text(json.dumps({"trajectory": _TRAJECTORY, "events": [
        {"type": event_type, "payload": payload} for event_type, payload in _EVENTS]}))
    out = json.loads(run_node(node, "test/integration/parityProducer.js", url, TEST_KEY,
                              str(tmp_path / "ts-queue"), str(script)))
    assert out["flushed"] and out["stats"]["sent"] == len(_EVENTS), out
    return out["ids"]


@pytest.mark.kafka
def test_python_and_typescript_producers_write_identical_events(
    kafka: Settings, node: str, tmp_path: Path,
) -> None:
    with running_server(kafka) as server:
        python_ids = _python_producer(server.url, tmp_path / "py-queue")
        typescript_ids = _typescript_producer(node, server.url, tmp_path)
    on_log = _each_once_on_the_log(kafka, python_ids + typescript_ids)
    compared = 0
    for (event_type, _), python_id, typescript_id in zip(_EVENTS, python_ids, typescript_ids,
                                                         strict=True):
        py, ts = on_log[python_id], on_log[typescript_id]
        assert py["type"] == ts["type"] == event_type
        assert py.keys() == ts.keys() and py["payload"].keys() == ts["payload"].keys()
        for field in sorted(py.keys() - _PER_SEND - {"payload"}):
            assert json.dumps(py[field]) == json.dumps(ts[field]), (event_type, field)
            compared += 1
        for field in sorted(py["payload"]):
            assert json.dumps(py["payload"][field]) == json.dumps(ts["payload"][field]), (
                event_type, f"payload.{field}")
            compared += 1
        for field in _PER_SEND - {"event_id"}:
            assert py[field] is not None and ts[field] is not None, (event_type, field)
        assert python_id != typescript_id
    print(f"python and typescript producers: {len(_EVENTS)} events each, {compared} fields "
          "identical on events.raw")

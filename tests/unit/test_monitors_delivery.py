"""Delivery payloads: Alertmanager's postable alerts and its webhook JSON; config errors."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from schemas.alert_lifecycle import AlertState, apply
from schemas.alerts import Alert, AlertEvent
from streams.monitors.config import load_config
from streams.monitors.delivery import alertmanager_alert, webhook_payload
from streams.monitors.errors import MonitorConfigError

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _state() -> AlertState:
    alert = Alert(detector="broken_call_spike", fingerprint="fp1", title="Broken tool calls spiked",
                  severity="critical", summary="s", evidence={"n": 3}, runbook="r",
                  labels={"alertname": "broken_call_spike", "checkpoint": "c1", "arm": "a",
                          "org": "*", "severity": "critical"}, window_end=T0)
    state = AlertState()
    apply(state, AlertEvent(event_id="e1", kind="fired", occurred_at=T0, actor="detector",
                            fingerprint="fp1", alert=alert))
    return state


def test_alertmanager_alert_holds_open_alerts_and_ends_resolved_ones() -> None:
    state = _state()
    record = state.alerts["fp1"]
    now = T0 + timedelta(minutes=5)
    body = alertmanager_alert(record, now, 240, "http://console")
    assert body["labels"]["alertname"] == "broken_call_spike"
    assert body["startsAt"] == "2026-01-01T00:00:00Z"
    assert body["endsAt"] == "2026-01-01T00:09:00Z"  # now + 240 s
    assert json.loads(body["annotations"]["evidence"]) == {"n": 3}
    assert body["generatorURL"] == "http://console/#alert-fp1"
    apply(state, AlertEvent(event_id="e2", kind="resolved", occurred_at=now, actor="ana",
                            fingerprint="fp1"))
    assert alertmanager_alert(record, now, 240, "http://c")["endsAt"] == "2026-01-01T00:05:00Z"


def test_webhook_payload_is_alertmanager_version_4() -> None:
    record = _state().alerts["fp1"]
    body = webhook_payload(record, "rewardstream", "http://console")
    assert set(body) == {"version", "groupKey", "truncatedAlerts", "status", "receiver",
                         "groupLabels", "commonLabels", "commonAnnotations", "externalURL",
                         "alerts"}
    assert (body["version"], body["status"], body["receiver"]) == ("4", "firing", "rewardstream")
    assert body["groupKey"] == '{}:{alertname="broken_call_spike"}'
    (alert,) = body["alerts"]
    assert set(alert) == {"status", "labels", "annotations", "startsAt", "endsAt",
                          "generatorURL", "fingerprint"}
    assert alert["endsAt"] == "0001-01-01T00:00:00Z"  # Alertmanager's "not ended"


def test_config_file_overrides_and_names_bad_fields(tmp_path: Path) -> None:
    path = tmp_path / "monitors.yaml"
    path.write_text("threshold: 10\nauto_protect: true\ndetectors:\n  latency_regression:\n"
                    "    enabled: false\n")
    config = load_config(path)
    assert config.threshold == 10 and config.auto_protect
    assert not next(d for d in config.detectors if d.name == "latency_regression").enabled
    path.write_text("treshold: 10\n")
    with pytest.raises(MonitorConfigError, match="treshold"):
        load_config(path)
    path.write_text("detectors:\n  nope:\n    enabled: false\n")
    with pytest.raises(MonitorConfigError, match="detectors.nope"):
        load_config(path)

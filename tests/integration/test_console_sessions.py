"""The console's sign-in against the real broker: a staff key becomes a server-side session
(HttpOnly, SameSite=Strict, Secure over https); actions in a session need its CSRF token;
signing out or revoking the key ends it; wrong keys are limited per address; every answer
carries a Content-Security-Policy and the pages hold no inline script or style; and staff see
and act on only the orgs their key names."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from infra.kafka_io import make_producer, send
from infra.settings import Settings
from schemas.alerts import Alert, AlertEvent, alert_event_key, alert_fingerprint
from schemas.metrics import MetricStat, MetricWindow, metric_key
from serving.console.app import create_app
from serving.console.auth import COOKIE, StaffAuth
from serving.console.state import ConsoleState
from serving.ingest.keys import ApiKey, KeyFile, KeyScope, hash_key
from tests.support.monitors_seed import publish_registry
from tests.support.service_keys import staff_keys
from tests.support.waits import wait_for

pytestmark = pytest.mark.kafka

STAFF = {"fleet-key-0001": ("fleet", ["*"]), "acme-key-00001": ("ann", ["acme"])}
ORGS = ("acme", "evil", "*")


def _alert_event(org: str) -> AlertEvent:
    labels = {"alertname": "edit_rate_collapse", "checkpoint": "c1", "arm": "default",
              "org": org, "severity": "critical"}
    fingerprint = alert_fingerprint("edit_rate_collapse", labels)
    now = datetime.now(UTC)
    alert = Alert(detector="edit_rate_collapse", fingerprint=fingerprint, severity="critical",
                  title=f"edit rate collapsed ({org})", summary="0.9 -> 0.1", evidence={},
                  runbook="roll back", labels=labels, window_end=now)
    return AlertEvent(event_id=f"fired-{org}", kind="fired", occurred_at=now,
                      actor="detector", fingerprint=fingerprint, alert=alert)


def _window(org: str) -> MetricWindow:
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=5)
    return MetricWindow(scope="rewards", window_start=start,
                        window_end=start + timedelta(minutes=1), checkpoint_id="c1",
                        arm="default", org_id=org, trajectories=4,
                        stats={"edit_rate": MetricStat(n=4, sum=2, sumsq=2)})


def _publish(settings: Settings) -> None:
    """c0 and c1 (their lineage names no org), and an alert and a window per org and '*'."""
    publish_registry(settings)
    producer = make_producer(settings, "test")
    for org in ORGS:
        event = _alert_event(org)
        send(producer, settings, "alerts", alert_event_key(event),
             event.model_dump_json().encode())
        window = _window(org)
        send(producer, settings, "metrics", metric_key(window.checkpoint_id, window.arm),
             window.model_dump_json().encode())
    producer.close()


@pytest.fixture
def keys_file(tmp_path: Path) -> Path:
    path = tmp_path / "console-keys.json"
    entries = [ApiKey(name, hash_key(key), "", scope=KeyScope.CONSOLE,
                      orgs=frozenset(orgs)).to_entry() for key, (name, orgs) in STAFF.items()]
    path.write_text(json.dumps(entries))
    return path


@pytest.fixture
def console(kafka: Settings, keys_file: Path) -> Iterator[TestClient]:
    _publish(kafka)
    auth = StaffAuth(KeyFile(keys_file, check_every_s=0.0))
    with TestClient(create_app(ConsoleState(kafka), auth)) as client:
        wait_for(lambda: len(client.get("/api/alerts", headers={"X-Staff-Key": "fleet-key-0001"})
                             .json()["alerts"]) == 3, 30, "the console to fold the alerts")
        yield client


def _sign_in(client: TestClient, key: str) -> str:
    """Sign in; returns the CSRF token the page carries."""
    response = client.post("/api/session", json={"key": key})
    assert response.status_code == 200, response.text
    page = client.get("/")
    assert page.status_code == 200
    found = re.search(r'name="csrf-token" content="([^"]+)"', page.text)
    assert found is not None
    return found.group(1)


def test_a_key_becomes_a_session_cookie_the_page_cannot_read(console: TestClient) -> None:
    response = console.post("/api/session", json={"key": "fleet-key-0001"})
    cookie = response.headers["set-cookie"]
    assert response.json()["staff"] == "fleet" and cookie.startswith(f"{COOKIE}=")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    assert "Secure" not in cookie  # served over plain http here
    assert "fleet-key-0001" not in cookie  # a random id, not the key
    assert console.get("/api/alerts").status_code == 200  # the cookie alone reads


def test_over_https_the_cookie_is_secure(kafka: Settings, keys_file: Path) -> None:
    auth = StaffAuth(KeyFile(keys_file))
    app = create_app(ConsoleState(kafka), auth, follow=False)
    with TestClient(app, base_url="https://console.example") as client:
        cookie = client.post("/api/session", json={"key": "fleet-key-0001"}).headers["set-cookie"]
    assert "Secure" in cookie


def test_every_answer_has_a_csp_and_pages_have_no_inline_script_or_style(
        console: TestClient) -> None:
    login = console.get("/")
    csrf = _sign_in(console, "fleet-key-0001")
    page = console.get("/")
    for response in (login, page, console.get("/api/alerts"), console.get("/static/console.js"),
                     console.get("/healthz")):
        policy = response.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "style-src 'self'" in policy
        assert "unsafe-inline" not in policy and "frame-ancestors 'none'" in policy
    for html in (login.text, page.text):
        assert "<style" not in html and "style=" not in html
        assert "`" not in html  # commands are set as <code>, never in backticks
        assert all('src="/static/' in tag for tag in re.findall(r"<script[^>]*>", html))
    assert csrf and csrf in page.text
    assert console.get("/static/console.js").headers["content-type"].startswith(
        "text/javascript")
    assert console.get("/static/nope.js").status_code == 404


def test_actions_in_a_session_need_its_csrf_token(console: TestClient) -> None:
    csrf = _sign_in(console, "fleet-key-0001")
    fp = _alert_event("acme").fingerprint
    path = f"/api/alerts/{fp}/acknowledge"
    assert console.post(path, json={}).status_code == 403
    assert console.post(path, json={}, headers={"X-CSRF-Token": "forged"}).status_code == 403
    done = console.post(path, json={}, headers={"X-CSRF-Token": csrf})
    assert done.status_code == 200, done.text
    views = {a["fingerprint"]: a for a in console.get("/api/alerts").json()["alerts"]}
    assert views[fp]["acknowledged_by"] == "fleet"


def test_signing_out_ends_the_session_on_the_server(console: TestClient) -> None:
    csrf = _sign_in(console, "fleet-key-0001")
    session_id = console.cookies[COOKIE]
    assert console.delete("/api/session", headers={"X-CSRF-Token": csrf}).status_code == 200
    console.cookies.set(COOKIE, session_id)  # a copy of the cookie kept from before
    assert console.get("/api/alerts").status_code == 401


def test_revoking_the_key_ends_its_sessions(console: TestClient, keys_file: Path) -> None:
    _sign_in(console, "acme-key-00001")
    assert console.get("/api/alerts").status_code == 200
    entries = [e for e in json.loads(keys_file.read_text()) if e["name"] != "ann"]
    keys_file.write_text(json.dumps(entries, indent=2))
    assert console.get("/api/alerts").status_code == 401


def test_wrong_keys_are_limited_per_address(kafka: Settings) -> None:
    app = create_app(ConsoleState(kafka), StaffAuth(staff_keys()), follow=False)
    with TestClient(app, client=("203.0.113.7", 5000)) as attacker, \
            TestClient(app, client=("198.51.100.2", 5000)) as colleague:
        answers = [attacker.post("/api/session", json={"key": f"guess-{n}"}).status_code
                   for n in range(11)]
        assert answers == [403] * 10 + [429]
        limited = attacker.post("/api/session", json={"key": "ana-secret-key"})
        assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
        header = attacker.get("/api/alerts", headers={"X-Staff-Key": "ana-secret-key"})
        assert header.status_code == 429  # the key header is the same door
        assert colleague.post("/api/session", json={"key": "ana-secret-key"}).status_code == 200


def test_staff_see_and_act_on_only_the_orgs_their_key_names(console: TestClient) -> None:
    csrf = _sign_in(console, "acme-key-00001")
    alerts = console.get("/api/alerts").json()["alerts"]
    assert [a["labels"]["org"] for a in alerts] == ["acme"]
    series = console.get("/api/series?metric=edit_rate").json()["series"]
    assert [s["org"] for s in series] == ["acme"]  # not evil's, not the unsplit '*' windows
    assert console.get("/api/checkpoints").json()["checkpoints"] == []  # lineage names no org
    assert console.get("/api/quarantine").json()["fleet_only"] is True
    evil = _alert_event("evil").fingerprint
    refused = console.post(f"/api/alerts/{evil}/acknowledge", json={},
                           headers={"X-CSRF-Token": csrf})
    unknown = console.post("/api/alerts/0000000000000000/acknowledge", json={},
                           headers={"X-CSRF-Token": csrf})
    assert refused.status_code == unknown.status_code == 409
    assert refused.json()["detail"].replace(evil, "X") == \
        unknown.json()["detail"].replace("0000000000000000", "X")  # as if it did not exist
    rollback = console.post("/api/checkpoints/c1/rollback", json={"reason": "x"},
                            headers={"X-CSRF-Token": csrf})
    assert rollback.status_code == 409 and "not in the registry" in rollback.json()["detail"]
    assert "orgs acme" in console.get("/").text

    fleet = {"X-Staff-Key": "fleet-key-0001"}
    assert {a["labels"]["org"] for a in console.get("/api/alerts", headers=fleet)
            .json()["alerts"]} == set(ORGS)
    assert {s["org"] for s in console.get("/api/series?metric=edit_rate", headers=fleet)
            .json()["series"]} == set(ORGS)
    assert len(console.get("/api/checkpoints", headers=fleet).json()["checkpoints"]) == 4

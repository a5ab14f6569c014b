"""End to end: alerts reach a real Alertmanager and a webhook; staff act in headless Chromium.

Needs Debian's ``prometheus-alertmanager`` and ``chromium``; under CI=true their absence fails.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from infra.settings import Settings
from serving.console.app import create_app
from serving.console.auth import StaffAuth
from serving.console.state import ConsoleState
from streams.monitors.config import MonitorConfig, default_detectors
from streams.monitors.delivery import Deliverer, DeliveryTargets
from tests.support.cdp import Browser, chromium_binary, require_binary
from tests.support.monitors_seed import publish_registry, publish_windows, run_detectors
from tests.support.ports import free_port
from tests.support.service_keys import staff_keys
from tests.support.waits import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

_AM_CONFIG = """
route: {receiver: 'null', group_wait: 1s, group_interval: 1s, repeat_interval: 1h}
receivers: [{name: 'null'}]
"""


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[str]:
    binary = require_binary("prometheus-alertmanager", "alertmanager")
    port = free_port()
    (tmp_path / "am.yml").write_text(_AM_CONFIG)
    process = subprocess.Popen(
        [binary, f"--config.file={tmp_path / 'am.yml'}", f"--storage.path={tmp_path / 'am'}",
         f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _get_ok(url + "/-/ready"), 30, "Alertmanager to be ready")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def _get_ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


class _Hook(BaseHTTPRequestHandler):
    received: list[dict[str, Any]] = []
    calls = 0

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).calls += 1
        if type(self).calls == 1:  # the first delivery fails: the sender must retry
            self.send_response(503)
        else:
            type(self).received.append(json.loads(body))
            self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def webhook() -> Iterator[type[_Hook]]:
    _Hook.received, _Hook.calls = [], 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Hook.url = f"http://127.0.0.1:{server.server_address[1]}/hook"  # type: ignore[attr-defined]
    yield _Hook
    server.shutdown()


def _am_alerts(url: str, **params: str) -> list[dict[str, Any]]:
    return httpx.get(url + "/api/v2/alerts", params=params, timeout=5).json()


def test_alerts_delivered_and_handled_in_the_browser(
    kafka: Settings, alertmanager: str, webhook: type[_Hook], tmp_path: Path,
) -> None:
    chromium_binary()
    publish_registry(kafka)
    publish_windows(kafka, "defers_edits", n=1500)
    # The two detectors this page handles; deferred edits also move kept edits and the reward.
    two = tuple(d for d in default_detectors()
                if d.name in ("edit_rate_collapse", "clarification_spike"))
    runner = run_detectors(kafka, MonitorConfig(detectors=two), min_events=2)
    by_name = {r.alert.detector: fp for fp, r in runner.alerts.alerts.items()}
    collapse, clarify = by_name["edit_rate_collapse"], by_name["clarification_spike"]

    stop = threading.Event()
    targets = DeliveryTargets((alertmanager,), (webhook.url,), resend_s=1.0)  # type: ignore[attr-defined]
    deliverer = threading.Thread(target=Deliverer(kafka, targets).run, args=(stop,), daemon=True)
    deliverer.start()
    keys = StaffAuth(staff_keys())
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(ConsoleState(kafka), keys),
                                           host="127.0.0.1", port=port, log_level="warning"))
    console = threading.Thread(target=server.run, daemon=True)
    console.start()
    browser = Browser(tmp_path / "profile")
    try:
        # Delivery: both alerts reach the webhook (after one retry) and Alertmanager.
        wait_for(lambda: len(webhook.received) >= 2, 30, "two webhook notifications")
        first = webhook.received[0]
        assert webhook.calls >= 3  # one refused, retried, and the second alert
        assert first["version"] == "4" and first["status"] == "firing"
        assert first["alerts"][0]["fingerprint"] in (collapse, clarify)
        assert "evidence" in first["alerts"][0]["annotations"]
        wait_for(lambda: len(_am_alerts(alertmanager)) == 2, 30, "two alerts in Alertmanager")

        # The page refuses to show anything until a staff key is given.
        wait_for(lambda: server.started, 30, "the console")
        browser.goto(f"http://127.0.0.1:{port}/")
        assert browser.evaluate("!!document.getElementById('staff-key')")
        assert browser.evaluate("document.querySelectorAll('.alert').length") == 0
        browser.evaluate("document.getElementById('staff-key').value = 'ana-secret-key';"
                         "document.getElementById('sign-in').click(); true")
        browser.wait_for("document.body && document.body.dataset.loaded === 'yes'", 30,
                         "the console to render")
        # The session cookie is HttpOnly and nothing is kept in storage; the stylesheet and
        # script came from the console's own files under its Content-Security-Policy.
        assert browser.evaluate("document.cookie") == ""
        assert browser.evaluate("localStorage.length + sessionStorage.length") == 0
        assert browser.evaluate(
            "getComputedStyle(document.querySelector('header')).backgroundColor") == \
            "rgb(29, 35, 48)"

        def status(fp: str) -> str:
            return browser.evaluate(f"(document.getElementById('alert-{fp}') || "
                                    "{dataset: {}}).dataset.status || ''")

        def click(action: str, fp: str) -> None:
            browser.evaluate(f"document.querySelector('[data-action={action}]"
                             f"[data-problem=\"{fp}\"]').click(); true")

        def reaches(fp: str, state: str, what: str) -> None:
            browser.wait_for(f"document.getElementById('alert-{fp}').dataset.status === '{state}'",
                             30, what)

        assert status(collapse) == "firing" and status(clarify) == "firing"
        click("ack", collapse)
        reaches(collapse, "acknowledged", "acknowledged in the page")
        wait_for(lambda: any(a["annotations"].get("lifecycle") == "acknowledged"
                             for a in _am_alerts(alertmanager)), 30, "the ack in Alertmanager")

        click("silence", clarify)
        reaches(clarify, "silenced", "silenced in the page")
        wait_for(lambda: [a["status"]["state"] for a in _am_alerts(
            alertmanager, filter='alertname="clarification_spike"')] == ["suppressed"], 30,
            "the silence mirrored to Alertmanager")

        click("resolve", collapse)
        reaches(collapse, "resolved", "resolved in the page")
        resolved = wait_for(lambda: [p for p in webhook.received if p["status"] == "resolved"],
                            30, "the resolved webhook")
        assert resolved[0]["alerts"][0]["fingerprint"] == collapse
        wait_for(lambda: not _am_alerts(alertmanager, filter='alertname="edit_rate_collapse"'),
                 30, "the resolution in Alertmanager")
        browser.screenshot(tmp_path / "console.png")
        assert (tmp_path / "console.png").stat().st_size > 10_000
    finally:
        browser.close()
        server.should_exit = True
        stop.set()
        console.join(timeout=10)
        deliverer.join(timeout=10)

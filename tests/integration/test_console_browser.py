"""On-call in headless Chromium against the seeded alerts and trajectories (``console_seed``):
times read "5 min ago (14:03:12 UTC)" in the browser's zone; one card per problem; Roll back
only for what the platform serves; chart ticks on round steps in their units; the drill-down
from an alert to its trajectories; and no markup character anywhere as text. Screenshots of a
card and of the drill-down are left in the test's directory.

Needs Debian's ``chromium``; under CI=true its absence fails.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn

from infra.settings import Settings
from serving.console.app import create_app
from serving.console.auth import StaffAuth
from serving.console.state import ConsoleState
from tests.support.cdp import Browser, chromium_binary
from tests.support.console_seed import SERVED_ELSEWHERE, Seeded, seed_console
from tests.support.ports import free_port
from tests.support.service_keys import staff_keys
from tests.support.waits import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

# An instant as the page writes it, in a zone the browser names.
AGO = r"(just now|\d+ (s|min|h|d) ago)"
def clock(zone: str) -> str:
    return r"\((\d{4}-\d{2}-\d{2} )?\d{2}:\d{2}:\d{2} " + zone + r"\)"



# Text a page must never show: markup written as text, and what a script prints for a gap.
STRAY = ("`", "undefined", "NaN", "[object", "null", "&lt;", "&gt;", "&amp;", "<", ">")


@pytest.fixture
def console_url(kafka: Settings) -> Iterator[str]:
    port = free_port()
    app = create_app(ConsoleState(kafka), StaffAuth(staff_keys()))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, 30, "the console")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    chromium_binary()
    driven = Browser(tmp_path / "profile", width=1400, height=1000)
    try:
        yield driven
    finally:
        driven.close()


def _stray(browser: Browser, selector: str = "body") -> list[str]:
    text = browser.evaluate(f"document.querySelector('{selector}').innerText")
    return [token for token in STRAY if token in text]


def _sign_in(browser: Browser, url: str) -> None:
    browser.goto(url + "/")
    assert _stray(browser) == []
    assert "rewardstream keys create --for console" in browser.evaluate(
        "document.querySelector('.signin code').textContent")
    browser.evaluate("document.getElementById('staff-key').value = 'ana-secret-key';"
                     "document.getElementById('sign-in').click(); true")
    browser.wait_for("document.body && document.body.dataset.loaded === 'yes' && "
                     "document.querySelectorAll('#alerts .alert').length === 2", 60,
                     "the console to render both problems")


def _ticks(browser: Browser, metric: str) -> list[str]:
    browser.evaluate(f"(() => {{ const m = document.getElementById('metric'); m.value = "
                     f"'{metric}'; document.getElementById('chart').innerHTML = ''; "
                     "m.dispatchEvent(new Event('change')); return 1; })()")
    return browser.wait_for("(() => { const t = [...document.querySelectorAll('#chart .ytick')]"
                            ".map(e => e.textContent); return t.length > 2 && t; })()", 30,
                            "tick labels")


def _round_steps(labels: list[str], unit: str) -> None:
    values = [float(label.removesuffix(unit).replace(",", "").replace("\u2212", "-"))
              for label in labels]
    steps = {round(b - a, 9) for a, b in zip(values, values[1:], strict=False)}
    assert len(steps) == 1, labels  # evenly spaced
    step = steps.pop()
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert any(math.isclose(mantissa, m) for m in (1, 2, 2.5, 5)), labels
    assert all(label.endswith(unit) for label in labels), labels


def test_on_call_reads_a_problem_and_drills_down_to_its_trajectories(
        kafka: Settings, console_url: str, browser: Browser, tmp_path: Path) -> None:
    seeded: Seeded = seed_console(kafka)
    browser.set_timezone("UTC")
    _sign_in(browser, console_url)

    # One card per problem: acme's, evil's and the fleet's spike together.
    acme = seeded.fingerprint("broken_call_spike", "acme")
    cards = browser.evaluate("[...document.querySelectorAll('#alerts .alert')]"
                             ".map(c => [c.id, c.dataset.scopes])")
    assert sorted(cards) == sorted([[f"problem-{acme}", "3"], [
        f"problem-{seeded.fingerprint('latency_regression', 'acme', SERVED_ELSEWHERE)}", "2"]])
    card = f"#problem-{acme}"
    text = browser.evaluate(f"document.querySelector('{card}').innerText")
    assert re.search(rf"fired {AGO} {clock('UTC')}", text), text
    assert re.search(rf"latest window ended {AGO} {clock('UTC')}", text), text
    assert "org acme" in text and "org evil" in text and "fleet (every org)" in text
    # Roll back for c1, which the platform serves; not for the model served elsewhere.
    assert browser.evaluate(f"document.querySelector('{card} [data-action=rollback]')"
                            ".textContent") == "Roll back c1"
    elsewhere = f"#problem-{seeded.fingerprint('latency_regression', 'acme', SERVED_ELSEWHERE)}"
    assert browser.evaluate(f"document.querySelector('{elsewhere} [data-action=rollback]')") \
        is None
    assert "is not served by the platform" in browser.evaluate(
        f"document.querySelector('{elsewhere}').innerText")
    assert _stray(browser) == []
    browser.screenshot_element(card, tmp_path / "alert-card.png")

    # Chart ticks: round steps, in the metric's unit.
    _round_steps(_ticks(browser, "rewards:broken_call_trajectory_rate"), "%")
    _round_steps(_ticks(browser, "rewards:latency_p95_ms"), " ms")
    assert browser.evaluate("[...document.querySelectorAll('#chart .xtick')].every("
                            "t => /^\\d{2}:\\d{2}$/.test(t.textContent))")

    # From acme's scope of the card to the trajectories in its window.
    browser.evaluate(f"document.querySelector('#alert-{acme} [data-action=samples]').click(); 1")
    browser.wait_for("document.getElementById('samples').dataset.loaded === 'yes'", 60,
                     "the sample trajectories")
    rows = browser.evaluate("[...document.querySelectorAll('#samples tr.trajectory')]"
                            ".map(r => [r.dataset.org, r.dataset.trajectory])")
    assert rows == [["acme", name] for name in seeded.behind]
    assert browser.evaluate("location.hash") == f"#samples={acme}"
    browser.evaluate("document.querySelector('#samples tr.detail details').open = true; 1")
    drilled = browser.evaluate("document.getElementById('samples').innerText")
    for shown in ("org acme", "checkpoint c1", "broken_tool_calls", "completion.served",
                  "agent-model", "error_kind=malformed_call", "10 of 10", "turn 0", "credit",
                  "1 accepted", "edit (broken: malformed_call)"):
        assert shown in drilled, shown
    # The window's date is shown when it is not today (a run just after midnight UTC).
    assert re.search(r"event time (\d{4}-\d{2}-\d{2} )?\d{2}:\d{2}:\d{2}–\d{2}:\d{2}:\d{2} UTC",
                     drilled), drilled
    assert "evil-model" not in drilled
    assert _stray(browser) == []
    browser.screenshot_element("#samples", tmp_path / "drilldown.png")

    # The zone is the browser's, and named: the same page read from Tokyo.
    browser.set_timezone("Asia/Tokyo")
    browser.goto("about:blank")  # a new document: the link is this page's own
    browser.goto(console_url + f"/#samples={acme}")
    browser.wait_for("document.getElementById('samples').dataset.loaded === 'yes'", 60,
                     "the drill-down from its link")
    text = browser.evaluate(f"document.querySelector('{card}').innerText")
    assert re.search(rf"fired {AGO} {clock('GMT[+]9')}", text), text
    assert _stray(browser) == []
    for name in ("alert-card.png", "drilldown.png"):
        assert (tmp_path / name).stat().st_size > 10_000

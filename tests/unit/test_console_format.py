"""The console's formatting (``static/format.js``, run under node): times read "5 min ago
(14:03:12 UTC)" in the zone they are shown in, chart ticks fall on round steps and carry their
unit, values carry theirs, and code spans never show their backticks."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

FORMAT_JS = Path(__file__).parents[2] / "serving" / "console" / "static" / "format.js"
NOW = "2026-01-05T14:08:12Z"


def _node(expression: str, zone: str = "UTC") -> Any:
    """``expression`` evaluated with format.js's functions in scope, in time zone ``zone``."""
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI") == "true":
            pytest.fail("node is not installed (apt-get install -y nodejs)")
        pytest.skip("node is not installed")
    script = (f"const f = require({json.dumps(str(FORMAT_JS))});"
              f"const now = Date.parse('{NOW}'); process.stdout.write(JSON.stringify("
              f"(() => {{ with (f) {{ return {expression}; }} }})()));")
    done = subprocess.run([node, "-e", script], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "TZ": zone}, check=True)
    return json.loads(done.stdout)


def test_times_are_relative_with_the_clock_time_and_its_zone() -> None:
    shown = _node("[when('2026-01-05T14:03:12Z', now), when('2026-01-05T14:08:10Z', now),"
                  " when('2026-01-05T16:08:12+02:00', now), when('2026-01-04T14:03:12Z', now),"
                  " when('2026-01-05T15:10:00Z', now), when(null, now), when('nonsense', now),"
                  " span('2026-01-05T14:02:00Z', '2026-01-05T14:03:00Z', now)]")
    assert shown == ["5 min ago (14:03:12 UTC)", "just now (14:08:10 UTC)",
                     "just now (14:08:12 UTC)", "24 h ago (2026-01-04 14:03:12 UTC)",
                     "in 62 min (15:10:00 UTC)", "–", "–",
                     "14:02:00–14:03:00 UTC (5 min ago)"]
    # the same instant where the page is read: its own clock and the zone's name
    assert _node("when('2026-01-05T14:03:12Z', now)", "Asia/Tokyo") == \
        "5 min ago (23:03:12 GMT+9)"


@pytest.mark.parametrize(("low", "high"), [
    (-0.0865, 1.535), (0.0, 0.7242), (0.0, 3828.0), (0.031, 0.183), (12.0, 12.0),
    (-3.2, -0.4), (0.0, 1e-4), (1_000.0, 250_000.0)])
def test_ticks_fall_on_round_steps_that_cover_the_range(low: float, high: float) -> None:
    found = _node(f"niceTicks({low}, {high})")
    ticks, step = found["ticks"], found["step"]
    assert ticks[0] <= low and ticks[-1] >= high and 3 <= len(ticks) <= 7
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert any(math.isclose(mantissa, m) for m in (1, 2, 2.5, 5))
    assert all(math.isclose(b - a, step, rel_tol=1e-9) for a, b in zip(ticks, ticks[1:],
                                                                      strict=False))
    assert all(math.isclose(t / step, round(t / step), abs_tol=1e-6) for t in ticks)


def test_tick_labels_read_in_their_units() -> None:
    labels = _node("[['value', -0.0865, 1.535], ['share', 0, 0.183], ['ms', 0, 3828],"
                   " ['share', 0, 0.0123]].map(([u, lo, hi]) => { const t = niceTicks(lo, hi);"
                   " return t.ticks.map(v => formatValue(v, u, t.step)); })")
    assert labels == [["\u22120.5", "0.0", "0.5", "1.0", "1.5", "2.0"],
                      ["0%", "5%", "10%", "15%", "20%"],
                      ["0 ms", "1,000 ms", "2,000 ms", "3,000 ms", "4,000 ms"],
                      ["0.0%", "0.5%", "1.0%", "1.5%"]]
    times = _node("(() => { const t = timeTicks(now - 3600000, now); "
                  "return t.ticks.map(t.label); })()", "Asia/Kolkata")
    assert times == ["18:40", "18:50", "19:00", "19:10", "19:20", "19:30"]  # local, round


def test_values_in_their_units() -> None:
    assert _node("[formatValue(0.3125, 'share'), formatValue(Math.log(3828), 'log_ms'),"
                 " formatValue(12345.6, 'ms'), formatValue(-0.04, 'value'),"
                 " formatValue(40, 'count'), formatValue(null, 'value'),"
                 " formatChange(-0.5, 'relative'), formatChange(0.2, 'difference'),"
                 " formatChange(0.05, 'difference', 'share')]") == [
        "31.3%", "3,828 ms", "12,346 ms", "\u22120.04", "40", "–", "\u221250%", "+0.2", "+5%"]


def test_code_spans_and_markup_are_shown_as_text() -> None:
    assert _node("withCode('run `rewardstream keys create` <b>now</b> & a stray ` tick')") == (
        "run <code>rewardstream keys create</code> &lt;b&gt;now&lt;/b&gt; &amp; a stray  tick")
    assert _node("fields({a: 1, b: null, c: {d: 'x', e: [1, 2]}})") == [
        ["a", 1], ["c.d", "x"], ["c.e", [1, 2]]]

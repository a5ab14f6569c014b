"""Reward spec parsing, versioning and errors; spec comparison over a replayed log."""

from __future__ import annotations

import pytest

from streams.errors import SpecError
from streams.replay import compare_records, replay_rows
from streams.simlog import simulate_log
from streams.spec import DEFAULT_SPEC_PATH, load_spec, parse_spec

DEFAULT_TEXT = DEFAULT_SPEC_PATH.read_text()


def test_version_ignores_comments_and_layout_but_not_values() -> None:
    spec = load_spec()
    assert len(spec.version) == 16
    commented = "# a new comment\n" + DEFAULT_TEXT.replace("grace_s = 600", "grace_s   =   600")
    assert parse_spec(commented).version == spec.version
    changed = parse_spec(DEFAULT_TEXT.replace("broken_tool_call = -0.5", "broken_tool_call = -1.0"))
    assert changed.version != spec.version
    assert spec.horizons_s == (600, 3600) and spec.max_horizon_s == 3600


@pytest.mark.parametrize(("text", "field"), [
    ("[[kept]]\nhorizon_s = 0\nweight = 1.0\n", "kept.0.horizon_s"),
    ("[[kept]]\nhorizon_s = 60\nweight = 1.0\n[weights]\nbroken_call = -1\n",
     "weights.broken_call"),
    ("name = 'x'\n", "kept"),
])
def test_errors_name_the_field(text: str, field: str) -> None:
    with pytest.raises(SpecError, match=f"field {field}"):
        parse_spec(text, "my.toml")


def test_unreadable_and_invalid_files_say_so(tmp_path) -> None:
    with pytest.raises(SpecError, match="cannot read"):
        load_spec(tmp_path / "missing.toml")
    with pytest.raises(SpecError, match="not valid TOML"):
        parse_spec("kept = [", "bad.toml")


def test_compare_shows_the_component_that_moved() -> None:
    rows = [(0, offset, value) for offset, (_, value) in enumerate(simulate_log(150, seed=5))]
    before = replay_rows(rows, load_spec()).records
    harsher = parse_spec(DEFAULT_TEXT.replace("broken_tool_call = -0.5", "broken_tool_call = -2.0"))
    after = replay_rows(rows, harsher).records
    report = compare_records(before, after, top=3)
    assert report["trajectories"]["both"] == len(before) == len(after)
    deltas = {name: c["delta"] for name, c in report["components"].items()}
    assert deltas["broken_tool_calls"] < 0
    assert all(abs(delta) < 1e-12 for name, delta in deltas.items() if name != "broken_tool_calls")
    movers = report["top_movers"]
    assert len(movers) == 3 and movers[0]["delta"] <= movers[-1]["delta"] < 0

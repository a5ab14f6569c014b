"""The demo's pure parts: per-cycle figures from reward records, the cohort, the --hack option."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest
import typer

from harness.demo.metrics import cycle_figures
from harness.policy.expert import parse_mix
from schemas.rewards import RewardRecord

_AT = datetime(2026, 1, 1, tzinfo=UTC)


def _record(total: float, **signals: float) -> RewardRecord:
    return RewardRecord(
        trajectory_id=f"t{total}", spec_version="v", checkpoint_id="base", arm="production",
        outcome="completed", finalized_by="complete", finalized_at=_AT, samples=[],
        components={"kept_3600s": total, "turns": -0.1}, total=total, signals=signals,
        event_ids=[],
    )


def test_cycle_figures_are_means_and_shares_over_the_records() -> None:
    records = [
        _record(1.0, kept_fraction=1.0, edits_proposed=1, edits_accepted=1,
                latency_ms_mean=100.0),
        # Two of three proposed edits accepted, each half kept: a third of the proposed.
        _record(-1.0, kept_fraction=1 / 3, edits_proposed=3, edits_accepted=2,
                dissatisfied_followups=1, broken_tool_calls=2, latency_ms_mean=300.0),
        _record(0.5, clarifications=1, dissatisfied_followups=2),
        _record(-0.5),
    ]
    f = cycle_figures(records)
    assert f.trajectories == 4
    assert f.mean_reward == 0.0
    assert f.kept_edit_rate == (1 + 3 * (1 / 3)) / (1 + 3)  # kept edits per proposed edit
    assert f.kept_edits == (1 + 3 * (1 / 3)) / 4  # kept edits per trajectory
    assert f.edit_rate == 0.5
    assert f.dissatisfied_rate == 0.5
    assert f.broken_call_rate == 0.25
    assert f.clarification_rate == 0.25
    assert f.latency_ms == 100.0  # (100 + 300 + 0 + 0) / 4
    assert f.components == {"kept_3600s": 0.0, "turns": -0.1}


def test_no_proposed_edit_leaves_the_kept_edit_rate_unmeasured() -> None:
    f = cycle_figures([_record(-0.5, clarifications=1)])
    assert math.isnan(f.kept_edit_rate) and f.edit_rate == 0.0


def test_cycle_figures_of_no_records_are_nan() -> None:
    f = cycle_figures([])
    assert f.trajectories == 0 and math.isnan(f.mean_reward) and math.isnan(f.kept_edit_rate)


def test_a_cohort_takes_the_families_in_turn_and_is_the_same_for_one_seed() -> None:
    from harness.tasks import FAMILIES, user_cohort

    cohort = user_cohort(31, seed=3)
    assert len(cohort) == 31 == len({t.task_id for t in cohort})
    assert [t.family for t in cohort[:6]] == list(FAMILIES) * 2
    assert not any(t.held_out for t in cohort)
    assert [t.task_id for t in user_cohort(31, seed=3)] == [t.task_id for t in cohort]
    assert [t.task_id for t in user_cohort(31, seed=4)] != [t.task_id for t in cohort]


def test_the_demo_command_defaults_are_the_demo_config_defaults() -> None:
    import typer.main

    from harness.cli import demo
    from harness.demo.config import DemoConfig

    app = typer.Typer()
    app.command()(demo)
    command = typer.main.get_command(app)
    shared = {p.name for p in command.params} & DemoConfig.__dataclass_fields__.keys()
    assert {"cycles", "trajectories", "lr", "batch_records", "eval_per_family"} <= shared
    for param in command.params:
        if param.name in shared:
            assert param.default == DemoConfig.__dataclass_fields__[param.name].default, param.name


@pytest.mark.parametrize(("text", "parsed"), [
    ("clarify", ("clarify", 1.0)), ("broken-calls:0.3", ("broken-calls", 0.3)),
    ("broken-calls:1", ("broken-calls", 1.0)), ("warm", ("warm", 1.0)),
])
def test_a_mix_is_named_with_its_strength(text: str, parsed: tuple[str, float]) -> None:
    assert parse_mix(text) == parsed


@pytest.mark.parametrize(("text", "problem"), [
    ("broken-calls:0", "'broken-calls:0': strength 0: a share of trajectories in (0, 1]"),
    ("clarify:1.5", "'clarify:1.5': strength 1.5: a share of trajectories in (0, 1]"),
    ("clarify:half", "'clarify:half': the strength after ':' must be a number in (0, 1], got "
                     "'half'"),
    ("warm:0.5", "'warm:0.5': strength 0.5: only the hack mixes (clarify, broken-calls) take a "
                 "strength"),
    ("brokencalls", "'brokencalls': unknown mix 'brokencalls'; known: expert, warm, clarify, "
                    "broken-calls"),
])
def test_a_bad_mix_is_refused_naming_what_is_wrong(text: str, problem: str) -> None:
    with pytest.raises(ValueError) as raised:
        parse_mix(text)
    assert str(raised.value) == problem


def test_the_demo_refuses_a_hack_option_that_is_no_hack() -> None:
    from typer.testing import CliRunner

    from harness.cli import register

    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)  # two commands: typer keeps "demo" as a subcommand
    for text, problem in (("warm", "warm is not a hack; choose clarify, broken-calls"),
                          ("clarify:2", "strength 2: a share of trajectories in (0, 1]")):
        result = CliRunner().invoke(app, ["demo", "--hack", text])
        shown = " ".join(result.output.replace("│", " ").split())  # unwrap rich's error box
        assert result.exit_code == 2 and problem in shown

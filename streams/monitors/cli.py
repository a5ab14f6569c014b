"""``rewardstream monitors|alerts|ab ...``: the metrics worker, detectors, delivery, A/B report."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from infra.health_http import metrics_host_option, metrics_port_option
from streams.monitors.profiles import PROFILES

Scenario = StrEnum("Scenario", {name: name for name in PROFILES})  # type: ignore[misc]


class CompareBy(StrEnum):
    arm = "arm"
    checkpoint = "checkpoint"

if TYPE_CHECKING:
    from streams.monitors.config import MonitorConfig
    from streams.monitors.offline import OfflineResult

__all__ = ["register"]

monitors_app = typer.Typer(help="Windowed metrics and anomaly detectors.", no_args_is_help=True)
alerts_app = typer.Typer(help="Alert delivery to Alertmanager and webhooks.", no_args_is_help=True)
ab_app = typer.Typer(help="A/B comparisons of arms or checkpoints.", no_args_is_help=True)

_CONFIG_HELP = ("YAML/JSON file of detector settings (window_s, threshold, min_baseline_n, "
                "auto_protect, `detectors.<name>.enabled`, ...) over the profile's; the "
                "profile's alone without it.")


class Profile(StrEnum):
    production = "production"
    trial = "trial"


_PROFILE = typer.Option(Profile.production, help="Settings to start from: production (windows "
                        "of a minute, 300 baseline samples) or trial (10 s windows, 15 samples: "
                        "for a first trial or a demo, where a checkpoint serves minutes of "
                        "traffic; it sees only large shifts).")
_METRICS_METRICS_PORT = metrics_port_option("monitors-metrics")
_DETECT_METRICS_PORT = metrics_port_option("monitors-detect")
_DELIVERY_METRICS_PORT = metrics_port_option("alert-delivery")
_METRICS_HOST = metrics_host_option()


def _config(path: Path | None, profile: Profile = Profile.production) -> MonitorConfig:
    from streams.monitors.config import load_config

    return load_config(path, profile.value)


@monitors_app.command("metrics")
def metrics_worker(
    config: Path | None = typer.Option(None, help=_CONFIG_HELP),
    profile: Profile = _PROFILE,
    store: str = typer.Option("memory://", help="faust table store, e.g. rocksdb:// in production"),
    loglevel: str = typer.Option("warning", help="faust worker log level"),
    datadir: Path | None = typer.Option(
        None, help="Where faust keeps the worker's local state (the tables' RocksDB files with "
                   "--store rocksdb://); default: `<app id>-data` in the working directory."),
    metrics_port: int = _METRICS_METRICS_PORT,
    metrics_host: str = _METRICS_HOST,
) -> None:
    """Run the faust worker that folds rewards, events.raw and events.deadletter into windows.

    Writes one record per closed (checkpoint, arm) window to the metrics topic. Example:
    `rewardstream monitors metrics --store rocksdb://`
    """
    from infra.settings import load_settings
    from streams.monitors.app import run_metrics_worker

    run_metrics_worker(load_settings(), _config(config, profile), store=store,
                       loglevel=loglevel, datadir=datadir, metrics_port=metrics_port,
                       metrics_host=metrics_host)


@monitors_app.command("detect")
def detect(
    config: Path | None = typer.Option(None, help=_CONFIG_HELP),
    profile: Profile = _PROFILE,
    metrics_port: int = _DETECT_METRICS_PORT,
    metrics_host: str = _METRICS_HOST,
) -> None:
    """Run the detectors over the metrics topic and publish alert lifecycle events.

    Replays checkpoints, alerts and metrics on start (state = the log), then follows them.
    While Kafka is away it waits, then replays again. Example: `rewardstream monitors detect
    --config monitors.yaml`
    """
    from infra.settings import load_settings
    from streams.monitors.runner import run_forever

    run_forever(load_settings(), _config(config, profile), metrics_port, metrics_host)


@monitors_app.command("simulate")
def simulate_cmd(
    scenario: Scenario = typer.Option("defers_edits",
                                      help="profile of the second checkpoint"),
    trajectories: int = typer.Option(6000, help="total; the first half from a healthy parent"),
    seed: int = typer.Option(0, help="random seed (same seed, same records)"),
    out: Path | None = typer.Option(None, help="write JSON lines here instead of detecting"),
    config: Path | None = typer.Option(None, help=_CONFIG_HELP),
    spec: Path | None = typer.Option(None, help="reward spec TOML that scores the records "
                                     "(default: the shipped streams/specs/default.toml)"),
) -> None:
    """Simulated traffic through the pure path: prints every alert transition, or saves records.

    Example: `rewardstream monitors simulate --scenario broken_calls --trajectories 10000`
    """
    from streams.monitors.offline import run_offline
    from streams.monitors.simulate import Segment, simulate
    from streams.spec import load_spec

    half = trajectories // 2
    profile = PROFILES[scenario.value]
    segments = [Segment({"default": ("ck-parent", PROFILES["healthy"])}, half),
                Segment({"default": (f"ck-{scenario.value}", profile)}, trajectories - half)]
    records = simulate(segments, seed=seed, spec=load_spec(spec))
    if out is not None:
        with out.open("w") as handle:
            handle.writelines(r.model_dump_json() + "\n" for r in records)
        typer.echo(f"wrote {trajectories} reward records to {out}")
        return
    result = run_offline(records, _config(config))
    typer.echo(f"{result.trajectories} trajectories, {result.windows} windows, switch at {half}")
    _echo_transitions(result)


@monitors_app.command("calibrate")
def calibrate_cmd(
    config: Path | None = typer.Option(None, help=_CONFIG_HELP),
    seeds: int = typer.Option(5, min=1, help="runs of each kind, one seed each"),
    checkpoints: int = typer.Option(5, min=1, help="healthy checkpoints in turn, stable runs"),
    per_checkpoint: int = typer.Option(
        12000, min=100, help="trajectories each checkpoint serves (and before each change); "
        "to test against its own past a checkpoint must serve longer than trailing_gap_s"),
    rate: float = typer.Option(2.0, min=0.01, help="trajectories per second (event time)"),
    scenario: list[Scenario] = typer.Option(
        [], help="failure modes to time (repeatable); default: all but healthy"),
    records: list[Path] = typer.Option(
        [], help="JSON lines of reward records of a healthy run (repeatable, e.g. a demo's "
        "rewards.jsonl): the stable traffic is drawn from them instead of simulated, and no "
        "failure mode is timed"),
) -> None:
    """False alarms on stable simulated traffic, and how soon each failure mode fires, as a new
    checkpoint and as a drift of the same one: the figures the thresholds are sized by.

    About 10 minutes with the defaults. Example: `rewardstream monitors calibrate --config
    runs/demo-TIME/monitors.yaml --checkpoints 2 --per-checkpoint 160 --rate 1.2 --seeds 300
    --records runs/demo-TIME/rewards.jsonl`
    """
    from streams.monitors.calibrate import calibrate, describe
    from streams.monitors.sources import reward_records

    pool = [record for path in records for record in reward_records(path)]
    result = calibrate(_config(config), seeds=seeds, checkpoints=checkpoints,
                       per_checkpoint=per_checkpoint, rate_per_s=rate,
                       profiles=tuple(s.value for s in scenario), pool=pool)
    for line in describe(result):
        typer.echo(line)


@monitors_app.command("replay")
def replay(
    file: Path | None = typer.Option(None, help="JSON lines of reward records (a demo run's "
                                        "rewards.jsonl); default: the rewards topic"),
    config: Path | None = typer.Option(None, help=_CONFIG_HELP),
) -> None:
    """The detectors over recorded reward records, in one process: windows as the metrics worker
    makes them, then every alert transition, with the trajectories read when it happened. Try
    other thresholds on a run's traffic without running it again.

    Example: `rewardstream monitors replay --file runs/demo-TIME/rewards.jsonl
    --config runs/demo-TIME/monitors.yaml`
    """
    from streams.monitors.offline import run_offline
    from streams.monitors.sources import reward_records

    result = run_offline(reward_records(file), _config(config))
    typer.echo(f"{result.trajectories} trajectories, {result.windows} windows")
    _echo_transitions(result)


def _echo_transitions(result: OfflineResult) -> None:
    for count, t in result.transitions:
        labels = t.alert.labels
        scope = "fleet" if labels.get("org", "*") == "*" else f"org {labels['org']}"
        typer.echo(f"  after {count:>7} trajectories: {t.kind:8} {t.alert.severity:8} "
                   f"{t.alert.detector} on {labels.get('checkpoint')} ({scope}, against "
                   f"{'its own past' if labels.get('baseline') == 'trailing' else 'its parent'}"
                   f"): {t.alert.summary}")


@alerts_app.command("deliver")
def deliver(
    alertmanager: list[str] = typer.Option([], help="Alertmanager base URL (repeatable)"),
    webhook: list[str] = typer.Option(
        [], help="webhook URL for Alertmanager-style JSON (repeatable)"),
    console_url: str = typer.Option("http://127.0.0.1:8090", help="links in alerts point here"),
    resend_s: float = typer.Option(60.0, help="re-send open alerts to Alertmanager this often"),
    metrics_port: int = _DELIVERY_METRICS_PORT,
    metrics_host: str = _METRICS_HOST,
) -> None:
    """Push alerts to Alertmanager's /api/v2/alerts and to webhooks, with retries.

    Example: `rewardstream alerts deliver --alertmanager http://127.0.0.1:9093
    --webhook https://chat.example/hook`
    """
    from infra.settings import load_settings
    from streams.monitors.delivery import DeliveryTargets, run_delivery

    targets = DeliveryTargets(tuple(alertmanager), tuple(webhook), console_url,
                              resend_s=resend_s)
    run_delivery(load_settings(), targets, metrics_port, metrics_host)


@ab_app.command("report")
def ab_report(
    baseline: str = typer.Option(..., help="baseline arm (or checkpoint with --by checkpoint)"),
    candidate: str = typer.Option(..., help="candidate arm (or checkpoint)"),
    by: CompareBy = typer.Option(CompareBy.arm, help="compare by arm or by checkpoint"),
    file: Path | None = typer.Option(None, help="JSON lines of reward records; default: "
                                        "the rewards topic"),
    split: str = typer.Option("50/50", help="intended traffic split baseline/candidate"),
    confidence: float = typer.Option(0.95, help="interval coverage"),
    margin: float | None = typer.Option(
        None, min=0.0, help="also judge non-inferiority (streams.monitors.abrule): the reward "
        "loss the interval must rule out, e.g. 0.75"),
    org: str | None = typer.Option(None, help="only this organisation's records (default: "
                                              "the fleet's)"),
    as_json: bool = typer.Option(False, "--json", help="print JSON instead of a table"),
) -> None:
    """Edits kept, dissatisfied follow-ups, latency and broken calls as relative changes, the
    reward as a difference, each with its interval, plus a sample-ratio-mismatch check; with
    --margin, a fixed-size non-inferiority verdict on this one table (a running canary is
    decided by `rewardstream release run`).

    Example: `rewardstream ab report --baseline control --candidate candidate --split 90/10
    --org acme`
    """
    from dataclasses import asdict

    from streams.monitors.abreport import build_report, format_report
    from streams.monitors.abrule import AbRule, judge_ab
    from streams.monitors.errors import MonitorInputError
    from streams.monitors.sources import reward_records

    try:
        shares = tuple(float(part) for part in split.split("/"))
    except ValueError:
        shares = ()
    if len(shares) != 2 or min(shares) <= 0:
        raise MonitorInputError(f"--split {split!r}: write it as baseline/candidate, e.g. 90/10")
    report = build_report(reward_records(file), baseline, candidate, by=by.value,
                          shares=(shares[0], shares[1]), confidence=confidence, org=org)
    rule = AbRule(margin=margin) if margin is not None else None
    verdict = judge_ab(report, rule) if rule is not None else None
    if as_json:
        judged = {"verdict": verdict.evidence(report, rule)} if verdict and rule else {}
        typer.echo(json.dumps({**asdict(report), "srm_detected": report.srm_detected, **judged},
                              indent=2))
    else:
        typer.echo(format_report(report))
        if verdict is not None and rule is not None:
            typer.echo(f"\n{'non-inferior' if verdict.passed else 'NOT non-inferior'} "
                       f"({rule.describe()}): {verdict.reason}")


def register(app: typer.Typer) -> None:
    app.add_typer(monitors_app, name="monitors")
    app.add_typer(alerts_app, name="alerts")
    app.add_typer(ab_app, name="ab")

"""``rewardstream release run`` and ``rewardstream canary start|status|conclude|abort``."""

from __future__ import annotations

import getpass
import json
import threading
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from infra.settings import Settings
    from schemas.checkpoints import CheckpointEvent
    from streams.release.fold import ReleaseFold
    from streams.release.plan import ControllerConfig

__all__ = ["register"]

release_app = typer.Typer(help="The release controller: gate → canary → sequential A/B → "
                               "promote or reject, every step an event on `checkpoints`.",
                          no_args_is_help=True)
canary_app = typer.Typer(help="Canaries by hand: start one, see its A/B and the rule's state, "
                              "conclude or abort it.", no_args_is_help=True)

_SHARE = typer.Option(0.1, min=0.001, max=0.999, help="Share of the scope's users (sticky) a "
                      "canary gets; the rest stay on production.")
_ORG = typer.Option(None, help="Give the canary to this org's users only (default: the fleet).")
_MARGIN = typer.Option(0.15, min=0.0, help="Non-inferiority margin: the reward loss (canary − "
                       "production, reward units) the always-valid lower bound must rule out.")
_ALPHA = typer.Option(0.05, min=1e-6, max=0.5, help="Most chance of promoting a candidate "
                      "worse than production by the margin, however often it is looked at.")
_MAX_TRAJECTORIES = typer.Option(10_000, min=2, help="Both arms; a canary still undecided "
                                 "at this many trajectories is rejected.")
_MAX_HOURS = typer.Option(24.0, min=0.001, help="A canary still undecided after this long is "
                          "rejected.")
_MIN_PER_ARM = typer.Option(30, min=2, help="Trajectories each arm needs before any decision.")
_LOOKBACK_HOURS = typer.Option(24.0, min=0.0, help="History of each task before a canary "
                               "starts that its covariate (CUPED) averages.")


def _config(share: float, org: str | None, margin: float, alpha: float,
            max_trajectories: int, max_hours: float, min_per_arm: int,
            lookback_hours: float, **more: object) -> ControllerConfig:
    from streams.release.plan import ControllerConfig
    from streams.release.rule import SequentialRule

    rule = SequentialRule(margin=margin, alpha=alpha, max_trajectories=max_trajectories,
                          max_duration_s=max_hours * 3600, min_per_arm=min_per_arm)
    return ControllerConfig(share=share, org=org, rule=rule,
                            covariate_lookback_s=lookback_hours * 3600, **more)  # type: ignore[arg-type]


def _describe(event: CheckpointEvent) -> str:
    from streams.release.view import look_line

    ab = event.evidence.get("ab", {})
    spec = event.canary
    scope = (f" ({spec.share:.0%} of {'org ' + spec.org if spec.org else 'the fleet'}"
             f" against {spec.baseline})" if spec is not None else "")
    detail = (look_line(ab) + f" — {ab.get('reason', '')}") if ab else ""
    return f"{event.kind} {event.checkpoint_id}{scope}{': ' + detail if detail else ''}"


@release_app.command("run")
def release_run(
    share: float = _SHARE, org: str | None = _ORG, margin: float = _MARGIN, alpha: float = _ALPHA,
    max_trajectories: int = _MAX_TRAJECTORIES, max_hours: float = _MAX_HOURS,
    min_per_arm: int = _MIN_PER_ARM, lookback_hours: float = _LOOKBACK_HOURS,
    auto_start: bool = typer.Option(True, help="Start a canary for each checkpoint that passes "
                                    "the gate (--no-auto-start: only `canary start` does)."),
    look_interval_s: float = typer.Option(30.0, min=0.1, help="Record an interim look on "
                                          "`checkpoints` at most this often."),
    baseline_arm: str = typer.Option("production", help="The gateway arm production's users "
                                     "are on."),
) -> None:
    """Run the release controller until stopped (SIGINT/SIGTERM): it follows the registry,
    starts a canary for each checkpoint that passed the gate (a share of users, sticky, for the
    fleet or one org; the gateway serves it), reads the canary's A/B from the reward stream
    after every batch (the same metrics, guardrails, sample-ratio check and covariate as `ab
    report`), and decides by a sequential rule with always-valid bounds: promote, reject, or
    keep collecting up to a maximum. A critical alert on the canary aborts it. Every step is an
    event on `checkpoints` with its evidence; a restarted controller resumes from the log.

    Example: rewardstream release run --share 0.1 --margin 0.15 --max-hours 24
    """
    import logging
    import signal

    from infra.settings import load_settings
    from streams.release.service import run_controller

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    config = _config(share, org, margin, alpha, max_trajectories, max_hours, min_per_arm,
                     lookback_hours, auto_start=auto_start, look_interval_s=look_interval_s,
                     baseline_arm=baseline_arm)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    typer.echo(f"release controller: new canaries get {share:.0%} of "
               f"{'org ' + org if org else 'the fleet'}; {config.rule.describe()}", err=True)
    run_controller(load_settings(), config, stop,
                   on_event=lambda event: typer.echo(_describe(event), err=True))


def _read() -> tuple[Settings, ReleaseFold]:
    from infra.settings import load_settings
    from streams.release.service import read_fold

    settings = load_settings()
    return settings, read_fold(settings)


def _running(fold: ReleaseFold, checkpoint_id: str | None) -> CheckpointEvent:
    from schemas.errors import RegistryError
    from schemas.release import live_canary

    if checkpoint_id is None:
        running = [e for e in fold.registry.by_status("canary") if e.canary is not None]
        if len(running) != 1:
            raise RegistryError("no canary is running" if not running else
                                "several canaries run (one per model): name one "
                                f"({', '.join(e.checkpoint_id for e in running)})")
        checkpoint_id = running[0].checkpoint_id
    event = fold.registry.get(checkpoint_id)
    if live_canary(fold.registry, event.model) != event:
        ab = event.evidence.get("ab")
        raise RegistryError(f"{checkpoint_id} has no running canary: it is {event.status}"
                            + (f" ({ab.get('decision')}: {ab.get('reason')})" if ab else ""))
    return event


@canary_app.command("start")
def canary_start(
    checkpoint_id: str, share: float = _SHARE, org: str | None = _ORG, margin: float = _MARGIN,
    alpha: float = _ALPHA, max_trajectories: int = _MAX_TRAJECTORIES,
    max_hours: float = _MAX_HOURS, min_per_arm: int = _MIN_PER_ARM,
    lookback_hours: float = _LOOKBACK_HOURS,
    actor: str | None = typer.Option(None, help="Who acts (default: the login name)."),
) -> None:
    """Start the canary of a checkpoint that passed the gate (status canary): the gateway gives
    it the share of users; the release controller decides it by the rule given here. A full
    model (not an adapter) gets users only from a gateway whose --base-path is its directory.

    Example: rewardstream canary start tiny-0196... --share 0.05 --org acme"""
    from schemas.errors import RegistryError
    from schemas.release import start_canary
    from streams.release.service import publish

    settings, fold = _read()
    registry = fold.registry
    event = registry.get(checkpoint_id)
    production = registry.production(event.model)
    if production is None:
        raise RegistryError(f"model {event.model!r} has no production checkpoint to compare with")
    config = _config(share, org, margin, alpha, max_trajectories, max_hours, min_per_arm,
                     lookback_hours)
    now = datetime.now(UTC)
    spec = config.spec(checkpoint_id, production.checkpoint_id, now)
    started = start_canary(registry, checkpoint_id, now, actor or getpass.getuser(), spec)
    publish(settings, [started])
    typer.echo(_describe(started))
    if not started.adapter:
        typer.echo(f"warning: {checkpoint_id} is a full model, not a peft adapter: a gateway "
                   f"serves it only when its --base-path is {started.path}; any other gives "
                   "this canary no users, and it is rejected at its maximum (`canary abort` "
                   "it to free the slot)", err=True)


@canary_app.command("status")
def canary_status(
    checkpoint_id: str | None = typer.Argument(None, help="The canary (default: the one "
                                               "running)."),
    as_json: bool = typer.Option(False, "--json", help="The look's evidence as JSON."),
) -> None:
    """The running canary's A/B table, the sequential rule's state (bounds, split test) and how
    many more trajectories a decision needs at the current effect; computed from the topics now.

    Example: rewardstream canary status"""
    from streams.monitors.abreport import format_report
    from streams.release.plan import canary_evidence
    from streams.release.view import describe_look

    _, fold = _read()
    event = _running(fold, checkpoint_id)
    report, look = canary_evidence(fold, event, datetime.now(UTC))
    if as_json:
        typer.echo(json.dumps(look, indent=2))
        return
    typer.echo(_describe(event))
    if report is not None:
        typer.echo(format_report(report, ("production", "canary")))
    typer.echo(describe_look(look))


@canary_app.command("conclude")
def canary_conclude(
    checkpoint_id: str,
    actor: str | None = typer.Option(None, help="Who acts (default: the login name)."),
) -> None:
    """Decide the canary now on its evidence so far: promoted when the sequential rule already
    says promote, else rejected (non-inferiority not shown yet). The decision and its evidence go
    to `checkpoints`.

    Example: rewardstream canary conclude tiny-0196..."""
    from schemas.checkpoints import conclude_canary
    from streams.release.plan import canary_evidence
    from streams.release.service import publish

    settings, fold = _read()
    event = _running(fold, checkpoint_id)
    now = datetime.now(UTC)
    _, look = canary_evidence(fold, event, now)
    if look["decision"] != "promote":
        look = {**look, "decision": "reject", "passed": False,
                "reason": f"concluded by hand before the rule promoted: {look['reason']}"}
    decided = conclude_canary(fold.registry, event.checkpoint_id, now,
                              actor or getpass.getuser(), look)
    publish(settings, [decided])
    typer.echo(_describe(decided))


@canary_app.command("abort")
def canary_abort(
    checkpoint_id: str, reason: str = typer.Option(..., help="Why, recorded as evidence."),
    actor: str | None = typer.Option(None, help="Who acts (default: the login name)."),
) -> None:
    """Stop a running canary now: the checkpoint is rejected, production serves everyone.

    Example: rewardstream canary abort tiny-0196... --reason "users report broken edits" """
    from schemas.release import abort_canary
    from streams.release.service import publish

    settings, fold = _read()
    event = abort_canary(fold.registry, checkpoint_id, datetime.now(UTC),
                         actor or getpass.getuser(), reason)
    publish(settings, [event])
    typer.echo(_describe(event))


def register(app: typer.Typer) -> None:
    app.add_typer(release_app, name="release")
    app.add_typer(canary_app, name="canary")

"""``rewardstream train`` and ``rewardstream registry ...``."""

from __future__ import annotations

import getpass
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from infra.health_http import metrics_host_option, metrics_port_option

if TYPE_CHECKING:
    from trainer.registry_io import RegistryStore

__all__ = ["register"]

registry_app = typer.Typer(
    help="The checkpoint registry, folded from the `checkpoints` topic: list, show, promote, "
         "roll back. Serving follows its `production` alias.",
    no_args_is_help=True,
)


_METRICS_PORT = metrics_port_option("trainer")
_METRICS_HOST = metrics_host_option()


def train(
    config: Path | None = typer.Option(
        None, help="TOML file of trainer settings (field names of trainer.config.TrainConfig); "
        "options below override it."),
    model_dir: Path | None = typer.Option(None, help="Local Hugging Face causal LM to train."),
    out_dir: Path | None = typer.Option(None, help="Where checkpoints are written."),
    cycle: bool = typer.Option(False, "--cycle", help="Run cycles continuously: accumulate, "
                               "update, candidate, gate, promote or reject, repeat."),
    max_cycles: int | None = typer.Option(None, min=1, help="Stop after this many cycles."),
    lora: bool | None = typer.Option(None, "--lora/--full", help="LoRA adapter or full "
                                        "fine-tuning (default: full)."),
    lr: float | None = typer.Option(None, help="AdamW learning rate (default 1e-5)."),
    batch_records: int | None = typer.Option(None, help="Records per update (default 32)."),
    steps_per_cycle: int | None = typer.Option(None, help="Updates per cycle (default: "
                                                  "cycle by time, cycle_period_s)."),
    cycle_period_s: float | None = typer.Option(None, help="Cycle length in seconds (5 h)."),
    deterministic: bool | None = typer.Option(None, "--deterministic", help="Count-only "
                                                 "batching and deterministic kernels."),
    records: Path | None = typer.Option(None, help="Train from a JSONL file of reward "
                                           "records instead of the `rewards` topic."),
    registry_file: Path | None = typer.Option(None, help="Keep the registry in a JSONL file "
                                                 "instead of the `checkpoints` topic."),
    org: list[str] | None = typer.Option(None, help="Train only on this organisation's "
                                         "records (repeatable; default: every org's)."),
    metrics_port: int = _METRICS_PORT,
    metrics_host: str = _METRICS_HOST,
    canary: bool | None = typer.Option(None, "--canary/--no-canary", help="A candidate that "
                                       "passes the gate serves a canary, which the release "
                                       "controller (`rewardstream release run`) promotes or "
                                       "rejects on its A/B; --no-canary promotes it at once "
                                       "(default: the config file's, else no canary)."),
) -> None:
    """Train the policy on the `rewards` stream and gate each candidate.

    Each cycle starts from the registry's production checkpoint, consumes reward records in
    batches (by count, or when a batch is batch_timeout_s old), drops samples staler than
    max_staleness generations, takes one policy-gradient step per batch, writes a durable
    checkpoint (then commits the offsets), and runs the gate: promoted or rejected, as an event
    on `checkpoints`. Without --cycle it runs one cycle. Under torchrun it trains data-parallel.

    Example: rewardstream train --model-dir models/tiny --out-dir runs/ckpt --cycle
    --steps-per-cycle 4 --batch-records 16 --lr 1e-4
    """
    import os

    from infra.health_http import FiguresCollector, HealthServer, service_registry
    from infra.settings import load_settings
    from trainer.config import load_config
    from trainer.metrics import TRAINER_FIGURES, TrainerTotals
    from trainer.runner import print_line, run_training

    totals = TrainerTotals()
    if os.environ.get("RANK", "0") == "0":  # under torchrun, rank 0 reads, reports and serves
        registry = service_registry(FiguresCollector(totals, TRAINER_FIGURES))
        HealthServer(registry, lambda: None).serve(metrics_port, metrics_host)
    settings = load_settings()
    settings_overrides = dict(model_dir=model_dir, out_dir=out_dir, lora=lora, lr=lr,
                              batch_records=batch_records, steps_per_cycle=steps_per_cycle,
                              cycle_period_s=cycle_period_s, deterministic=deterministic,
                              orgs=tuple(org) if org else None, canary=canary)
    run_training(load_config(config, **settings_overrides), settings=settings,
                 records_file=records, registry_file=registry_file, continuous=cycle,
                 max_cycles=max_cycles, emit=totals.counting(print_line))


def _store(registry_file: Path | None) -> RegistryStore:
    from infra.settings import load_settings
    from trainer.registry_io import JsonlRegistryStore, KafkaRegistryStore

    if registry_file is not None:
        return JsonlRegistryStore(registry_file)
    settings = load_settings()
    return KafkaRegistryStore(settings)


_REGISTRY_FILE = typer.Option(None, help="A JSONL registry file instead of the topic.")
_ACTOR = typer.Option(None, help="Who acts (default: the login name).")


@registry_app.command("list")
def registry_list(
    history: bool = typer.Option(False,
                                 help="Every event read, not just each checkpoint's newest."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per line."),
    registry_file: Path | None = _REGISTRY_FILE,
) -> None:
    """Checkpoints with status, aliases, parent and the gate's verdict.

    Example: rewardstream registry list --history"""
    from trainer.registry_view import event_rows, render_rows

    registry = _store(registry_file).read()
    rows = event_rows(registry, history)
    typer.echo("\n".join(json.dumps(r, default=str) for r in rows) if as_json
               else render_rows(rows))


@registry_app.command("show")
def registry_show(checkpoint_id: str, registry_file: Path | None = _REGISTRY_FILE) -> None:
    """The newest event of one checkpoint in full: lineage, offsets, hyper-parameters, evidence."""
    event = _store(registry_file).read().get(checkpoint_id)
    typer.echo(json.dumps(event.model_dump(mode="json"), indent=2))


@registry_app.command("promote")
def registry_promote(
    checkpoint_id: str,
    reason: str = typer.Option(..., help="Why, recorded as the promotion's evidence."),
    actor: str | None = _ACTOR, registry_file: Path | None = _REGISTRY_FILE,
) -> None:
    """Make a checkpoint production by hand (the gate does this for candidates that pass).

    Example: rewardstream registry promote tiny-0196... --reason "re-deploy after fix" """
    from schemas.checkpoints import promotion

    store = _store(registry_file)
    event = promotion(store.read(), checkpoint_id, datetime.now(UTC),
                      actor or getpass.getuser(), {"reason": reason})
    store.publish([event])
    typer.echo(f"{checkpoint_id} is production (was {event.evidence['previous_production']})")


@registry_app.command("rollback")
def registry_rollback(
    checkpoint_id: str | None = typer.Argument(
        None, help="The checkpoint to roll back (default: production of --model)."),
    reason: str = typer.Option(..., help="Why, recorded as the rollback's evidence."),
    model: str | None = typer.Option(None, help="Model family (default: the only one)."),
    actor: str | None = _ACTOR, registry_file: Path | None = _REGISTRY_FILE,
) -> None:
    """Roll a checkpoint back. Production is marked rolled back and the previous production is
    promoted again (the base model serves when there is none); any other checkpoint is taken out
    of the running. The console's button and auto-protect write the same events.

    Example: rewardstream registry rollback --reason "edit-rate collapse alert" """
    from schemas.checkpoints import rollback
    from schemas.errors import RegistryError

    store = _store(registry_file)
    registry = store.read()
    if checkpoint_id is None:
        current = registry.production(model)
        if current is None:
            raise RegistryError("nothing to roll back: no checkpoint is production"
                                + (f" for model {model!r}" if model else ""))
        checkpoint_id = current.checkpoint_id
    events = rollback(registry, checkpoint_id, datetime.now(UTC),
                      actor or getpass.getuser(), reason)
    store.publish(events)
    restored = events[1].checkpoint_id if len(events) > 1 else None
    typer.echo(f"rolled back {checkpoint_id}" + (
        f"; production is {restored} again" if restored else
        "; no earlier production checkpoint: the base model serves" if
        events[0].evidence["previous_status"] == "production" else ""))


@registry_app.command("register")
def registry_register(
    directory: Path | None = typer.Argument(None, help="A Hugging Face model or peft adapter "
                                            "directory trained outside the platform."),
    model: str = typer.Option(..., help="The model family it belongs to (the registry's "
                              "`model`, e.g. the base model's name)."),
    external: str | None = typer.Option(None, help="Instead of a directory: the name of a "
                                        "checkpoint served outside the platform (no weights), "
                                        "so alerts and history can name it."),
    checkpoint_id: str | None = typer.Option(None, help="Its id (default: `MODEL-<uuid7>`)."),
    parent: str | None = typer.Option(None, help="The registry checkpoint it was trained from."),
    manifest: Path | None = typer.Option(None, help="Lineage: the manifest of the export that "
                                         "trained it (recorded with its sha256)."),
    offsets: list[str] | None = typer.Option(None, help="Lineage: Kafka offsets consumed, "
                                             "topic:partition=first-last (repeatable)."),
    org: list[str] | None = typer.Option(None, help="Organisations whose data trained it."),
    gate: bool = typer.Option(True, help="Run the gate now: a pass serves a canary, which the "
                              "release controller decides (--no-gate: gate it later)."),
    eval_suite: str = typer.Option("builtin", help="The gate's eval suite: builtin or "
                                   "package.module:factory."),
    gate_margin: float = typer.Option(0.02, min=0.0, help="Non-inferiority margin of the gate."),
    gate_broken_call_tolerance: float = typer.Option(0.05, min=0.0, max=1.0,
                                                     help="The gate's broken-call tolerance."),
    gate_seed: int = typer.Option(0, help="Seed of the gate's evals and bootstrap."),
    note: str = typer.Option("", help="With --external: a note kept as its evidence."),
    actor: str | None = _ACTOR, registry_file: Path | None = _REGISTRY_FILE,
) -> None:
    """Register a checkpoint trained elsewhere (TRL, verl, your own code) as a candidate with
    its lineage, and put it through the same gate and canary as the platform's own; the gateway
    serves a peft adapter like its own. Or, with --external NAME, register by name a model
    served outside the platform (never served, promoted or rolled back here).

    Example: rewardstream registry register ./trl-out --model demo-policy --manifest
    exports/2026-03-01/manifest.json"""
    from schemas.errors import RegistryError

    store = _store(registry_file)
    who = actor or getpass.getuser()
    now = datetime.now(UTC)
    if (directory is None) == (external is None):
        raise RegistryError("give a directory to register, or --external NAME, not both")
    if external is not None:
        from schemas.release import external_registration

        event = external_registration(store.read(), external, model, now, who, note)
        store.publish([event])
        typer.echo(f"{external} registered as served outside the platform (model {model})")
        return
    from trainer.register import parse_offsets, read_manifest, registration

    assert directory is not None
    event = registration(store.read(), directory, model, now, f"register:{who}",
                         checkpoint_id=checkpoint_id, parent_id=parent,
                         offsets=parse_offsets(offsets or []),
                         manifest=read_manifest(manifest) if manifest else None,
                         orgs=tuple(org or ()))
    store.publish([event])
    kind = "peft adapter" if event.adapter else "full model (served only where the gateway's " \
        "base is this directory)"
    typer.echo(f"{event.checkpoint_id} registered as a candidate: {kind} at {event.path}")
    if not gate:
        return
    from trainer.cycle import run_gate
    from trainer.evalsuite import build_suite
    from trainer.gate import Gate, describe_gate

    judge = Gate(build_suite(eval_suite, None), gate_margin, gate_broken_call_tolerance,
                 0.95, 2000, gate_seed)
    decision, evidence = run_gate(store, judge, event.checkpoint_id, Path(event.path),
                                  canary=True, now=datetime.now(UTC))
    typer.echo(f"gate: {decision}: {describe_gate(evidence)}")


def register(app: typer.Typer) -> None:
    app.command("train")(train)
    app.add_typer(registry_app, name="registry")

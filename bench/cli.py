"""``rewardstream bench ...``: each benchmark module exposes ``register(bench_app)``."""

from __future__ import annotations

import typer

from bench import fold, ingest, release_rule, restore, serving, streams, trainer

__all__ = ["register"]

bench_app = typer.Typer(
    help="Measure a part of the platform against a bare baseline in the same run; prints ratios.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    # In the order their commands appear in --help.
    for benchmark in (ingest, fold, streams, restore, serving, trainer, release_rule):
        benchmark.register(bench_app)
    app.add_typer(bench_app, name="bench")

"""``rewardstream bench ...``: each benchmark module exposes ``register(bench_app)``."""

from __future__ import annotations

import importlib

import typer

__all__ = ["register"]

# One module per benchmark; each adds its own command to the group.
_BENCHMARKS: tuple[str, ...] = (
    "bench.ingest",
    "bench.fold",
    "bench.streams",
    "bench.restore",
    "bench.serving",
    "bench.trainer",
    "bench.release_rule",
)

bench_app = typer.Typer(
    help="Measure a part of the platform against a bare baseline in the same run; prints ratios.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    for module in _BENCHMARKS:
        importlib.import_module(module).register(bench_app)
    app.add_typer(bench_app, name="bench")

"""The metrics worker's faust app, made without a broker."""

from __future__ import annotations

from pathlib import Path

from infra.settings import Settings
from streams.monitors.app import create_app
from streams.monitors.config import MonitorConfig


def test_a_datadir_under_missing_parents_is_made(tmp_path: Path) -> None:
    datadir = tmp_path / "run" / "state" / "monitors"
    app = create_app(Settings(), MonitorConfig(), datadir=datadir)
    app._create_directories()  # what faust does on start; it made only the last level
    assert app.conf.tabledir.is_dir() and app.conf.tabledir.is_relative_to(datadir)

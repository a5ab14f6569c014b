"""Before anything starts: `up` and the demo stop at a taken port with one line naming it and
what moves it (the demo before it builds its policy); `up`'s first keys are made once, each in a
file of its owner's only, and never printed."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.demo.config import DemoConfig
from infra.errors import ConfigError
from rewardstream.cli import app
from rewardstream.stack.keys import prepare_keys
from rewardstream.stack.services import RunDir
from rewardstream.stack.settings import SETTINGS, load_stack_settings
from serving.ingest.keys import KeyRing
from tests.support.ports import free_port

RUNNER = CliRunner()


@pytest.fixture
def held_port() -> Iterator[int]:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield held.getsockname()[1]


def test_up_stops_at_a_taken_port_naming_the_setting(tmp_path: Path, held_port: int) -> None:
    config = tmp_path / "rewardstream.toml"
    # A given cluster: no local broker is looked for or started.
    config.write_text(f'[kafka]\nbootstrap_servers = "127.0.0.1:1"\n[console]\nport = '
                      f'{held_port}\n')
    # Every other port of up's moved to a free one: a default may be held by anything running.
    others = {s.env: str(free_port()) for s in SETTINGS
              if s.is_port and not s.key.startswith("kafka.") and s.key != "console.port"}
    result = RUNNER.invoke(app, ["up", "--config", str(config)], env=others)
    assert isinstance(result.exception, ConfigError), result.output
    assert str(result.exception) == (
        f"port {held_port} (console) is in use by another process: stop it, or move console "
        f"with console.port in {config} (or REWARDSTREAM_CONSOLE_PORT)")
    assert not (tmp_path / "run" / "keys").exists()  # nothing was made


def test_the_demo_stops_at_a_taken_port_before_its_policy(tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        offset = held.getsockname()[1] - DemoConfig.ingest_port
        result = RUNNER.invoke(app, ["demo", "--runs", str(tmp_path), "--port-offset",
                                     str(offset)])
    assert isinstance(result.exception, ConfigError), result.output
    assert str(result.exception).startswith(
        f"port {DemoConfig.ingest_port + offset} (the demo's ingest) is in use")
    assert str(result.exception).endswith("move the demo's ingest with --port-offset")
    assert "policy" not in result.output


def test_the_first_keys_are_made_once_in_private_files_and_never_printed(
        tmp_path: Path) -> None:
    settings = load_stack_settings(None, env={"REWARDSTREAM_KEYS_ORG": "acme",
                                              "REWARDSTREAM_KEYS_STAFF": "ana",
                                              "REWARDSTREAM_RUN_DIR": str(tmp_path / "run")})
    run = RunDir(settings.run_dir)
    said: list[str] = []
    env = prepare_keys(settings, run, gateway=True, say=said.append)
    keys = {scope: (run.keys / f"{scope}.key").read_text().strip()
            for scope in ("ingest", "console", "gateway")}
    for scope, key in keys.items():
        ring = KeyRing.from_json((run.keys / f"{scope}-keys.json").read_text(), scope)
        assert ring.lookup(key) is not None, scope
        assert oct((run.keys / f"{scope}.key").stat().st_mode & 0o777) == "0o600"
    assert ring.lookup(keys["console"]) is None  # each key in its own service's file
    assert env["REWARDSTREAM_INGEST_KEYS_FILE"] == str(run.keys / "ingest-keys.json")
    secret = (run.secrets / "pseudonym.secret").read_text().strip()
    assert env["REWARDSTREAM_INGEST_PSEUDONYM_SECRET"] == secret and len(secret) >= 32
    again: list[str] = []
    prepare_keys(settings, run, gateway=True, say=again.append)
    assert {scope: (run.keys / f"{scope}.key").read_text().strip() for scope in keys} == keys
    assert sum("(new)" in line for line in said) == 4 and not any("(new)" in line for line in again)
    assert not any(key in line for key in keys.values() for line in said + again)
    assert any("ingest key for your producers of org acme" in line for line in said)

"""docker-compose.yml stays a valid deployment of commands that exist.

No Docker engine runs here, so the file is checked statically: it parses, every service's
dependencies exist, and every `rewardstream` command resolves to a real subcommand whose
options parse.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from infra.cli import app

COMPOSE = Path(__file__).resolve().parents[2] / "docker-compose.yml"


def _services() -> dict[str, dict]:
    return yaml.safe_load(COMPOSE.read_text())["services"]


def _parses(args: list[str]) -> bool:
    """Whether the CLI accepts these words: an unknown subcommand or option fails parsing
    before the eager --help would print and exit 0."""
    result = CliRunner().invoke(app, [*args, "--help"])
    return result.exit_code == 0


def test_compose_parses_and_dependencies_exist() -> None:
    services = _services()
    for name, service in services.items():
        depends = service.get("depends_on", {})
        for dependency in depends if isinstance(depends, list) else depends.keys():
            assert dependency in services, f"{name} depends on unknown service {dependency}"


@pytest.mark.parametrize("service", [
    name for name, s in _services().items() if str(s.get("command", [""])[0]) == "rewardstream"
])
def test_service_command_is_a_real_subcommand(service: str) -> None:
    assert _parses(_services()[service]["command"][1:])


def test_an_unknown_subcommand_or_option_is_caught() -> None:
    assert _parses(["worker", "--datadir", "/state"])
    assert not _parses(["serve", "nonexistent"])
    assert not _parses(["worker", "--no-such-flag"])
    assert not _parses(["serve", "gateway", "--engine-modle", "x"])


def test_every_long_running_part_has_a_service() -> None:
    commands = {" ".join(s["command"][1:3]) for s in _services().values()
                if str(s.get("command", [""])[0]) == "rewardstream"}
    for needed in ("serve ingest", "worker --datadir", "monitors metrics", "monitors detect",
                   "serve console", "serve gateway", "train --config"):
        assert needed in commands

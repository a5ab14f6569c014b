"""docker-compose.yml stays a valid deployment of commands that exist.

No Docker engine runs here, so the file is checked statically: it parses, every service's
dependencies exist, and every `rewardstream` command resolves to a real subcommand whose
options parse.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from rewardstream.cli import app

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
    assert _parses([_resolved(word, {}) for word in _services()[service]["command"][1:]])


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


CLUSTER_ENV = COMPOSE.parent / "infra" / "compose-cluster.env"
_VARIABLE = re.compile(r"\$\{(\w+)(?::-([^}]*)|:\?[^}]*)?\}")


def _resolved(value: object, env: dict[str, str]) -> str:
    """A compose value with ``${NAME}``, ``${NAME:-default}`` and ``${NAME:?error}`` filled in
    from ``env`` (what `docker compose config` does with its env files)."""
    return _VARIABLE.sub(lambda m: env.get(m.group(1)) or m.group(2) or "", str(value))


def _kafka_nodes(env: dict[str, str]) -> dict[str, dict[str, str]]:
    profiles = set(env.get("COMPOSE_PROFILES", "").split(","))
    return {name: {key: _resolved(value, env) for key, value in s["environment"].items()}
            for name, s in _services().items()
            if str(s.get("image", "")).startswith("apache/kafka")
            and (not s.get("profiles") or profiles & set(s["profiles"]))}


def _env_file(path: Path) -> dict[str, str]:
    lines = [line for line in path.read_text().splitlines() if line and not line.startswith("#")]
    return dict(line.split("=", 1) for line in lines)


def _node_config(node_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """The server.properties infra/compose/kafka-secure.sh writes for a node with this
    environment. The image's Kafka scripts are stand-ins that only record their arguments:
    what is checked is the script's rendering, the part this repository owns."""
    kafka_home = tmp_path / "kafka"
    (kafka_home / "bin").mkdir(parents=True)
    for tool in ("kafka-storage.sh", "kafka-server-start.sh"):
        stand_in = kafka_home / "bin" / tool
        stand_in.write_text('#!/bin/bash\necho "$@" >> "$KAFKA_WORK_DIR/calls"\n')
        stand_in.chmod(0o755)
    (tmp_path / "admin.password").write_text("s3cret_pw-1\n")
    work = tmp_path / "work"
    env = {**node_env, "PATH": os.environ["PATH"], "KAFKA_HOME": str(kafka_home),
           "REWARDSTREAM_INFRA": str(COMPOSE.parent / "infra"), "KAFKA_WORK_DIR": str(work),
           "KAFKA_ADMIN_PASSWORD_FILE": str(tmp_path / "admin.password")}
    script = COMPOSE.parent / "infra" / "compose" / "kafka-secure.sh"
    subprocess.run(["bash", str(script)], env=env, check=True, capture_output=True)
    lines = (work / "server.properties").read_text().splitlines()
    config = dict(line.split("=", 1) for line in lines if "=" in line and line[0] != "#")
    assert "{" not in "".join(config.values()), "a placeholder left unfilled"
    return config


def test_default_layout_is_one_node_with_replication_one(tmp_path: Path) -> None:
    nodes = _kafka_nodes({})
    assert list(nodes) == ["kafka"]
    config = _node_config(nodes["kafka"], tmp_path)
    assert (config["node.id"], config["controller.quorum.voters"]) == ("1", "1@kafka:9093")
    for key in ("offsets.topic.replication.factor", "default.replication.factor",
                "transaction.state.log.min.isr", "min.insync.replicas"):
        assert config[key] == "1", key
    assert config["advertised.listeners"] == "PLAINTEXT://kafka:9092"
    assert config["authorizer.class.name"].endswith("StandardAuthorizer")  # secured as well
    app_env = _services()["ingest"]["environment"]
    assert _resolved(app_env["REWARDSTREAM_BOOTSTRAP_SERVERS"], {}) == "kafka:9092"
    assert _resolved(app_env["REWARDSTREAM_KAFKA_BROKERS"], {}) == "1"


def test_cluster_profile_is_three_voters_that_the_services_all_reach(tmp_path: Path) -> None:
    env = _env_file(CLUSTER_ENV)
    nodes = _kafka_nodes(env)
    assert sorted(nodes) == ["kafka", "kafka-2", "kafka-3"]
    assert len({n["CLUSTER_ID"] for n in nodes.values()}) == 1  # one cluster
    configs = {name: _node_config(node, tmp_path / name) for name, node in nodes.items()}
    assert sorted(c["node.id"] for c in configs.values()) == ["1", "2", "3"]
    voters = {f"{c['node.id']}@{name}:9093" for name, c in configs.items()}
    for config in configs.values():
        assert set(config["controller.quorum.voters"].split(",")) == voters
        assert (config["default.replication.factor"], config["min.insync.replicas"]) == (
            "3", "2")
    advertised = {c["advertised.listeners"].removeprefix("PLAINTEXT://")
                  for c in configs.values()}
    app_env = _services()["ingest"]["environment"]
    assert set(_resolved(app_env["REWARDSTREAM_BOOTSTRAP_SERVERS"], env).split(",")) == advertised
    assert _resolved(app_env["REWARDSTREAM_KAFKA_BROKERS"], env) == "3"
    volumes = {tuple(_services()[name]["volumes"]) for name in nodes}
    assert len(volumes) == 3  # each node its own data
    assert all("./infra:/opt/rewardstream/infra:ro" in _services()[name]["volumes"]
               for name in nodes)
    waits = _services()["topics"]["depends_on"]
    assert {name for name in nodes} <= set(waits)
    assert all(waits[name].get("required", True) is False for name in ("kafka-2", "kafka-3"))

"""docker-compose.yml connects each service to Kafka as its own principal of the table, with
only its own password as a secret (checked statically: no Docker engine runs here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from infra.broker_security import ADMIN
from infra.principals import PRINCIPALS

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
# The services that never open a Kafka client.
_NO_KAFKA = {"kafka", "kafka-2", "kafka-3", "alertmanager", "engine", "vllm", "prometheus",
             "grafana"}


def _secrets(service: dict[str, Any]) -> dict[str, str]:
    """target path → secret name."""
    out = {}
    for secret in service.get("secrets", []):
        source, target = ((secret, secret) if isinstance(secret, str)
                          else (secret["source"], secret.get("target", secret["source"])))
        out[target if target.startswith("/") else f"/run/secrets/{target}"] = source
    return out


def test_every_kafka_client_service_is_one_principal_with_its_own_password() -> None:
    users = {ADMIN, *(p.name for p in PRINCIPALS)}
    declared = COMPOSE["secrets"]
    seen = set()
    for name, service in COMPOSE["services"].items():
        if name in _NO_KAFKA:
            continue
        env = service["environment"]
        user = env["REWARDSTREAM_KAFKA_USERNAME"]
        assert env["REWARDSTREAM_KAFKA_SECURITY_PROTOCOL"] == "SASL_PLAINTEXT", name
        assert user in users, f"{name} connects as {user!r}, which the table does not name"
        source = _secrets(service)[env["REWARDSTREAM_KAFKA_PASSWORD_FILE"]]
        file = declared[source]["file"]
        assert file == f"./config/kafka/{user}.password", (name, file)
        # Only the principals' creator holds the others' passwords.
        if name != "kafka-principals":
            assert {s for s in _secrets(service).values() if s.startswith("kafka_")} == {source}
        seen.add(user)
    assert seen == users  # every principal of the table runs somewhere


def test_the_principals_creator_gets_every_password_under_its_credentials_dir() -> None:
    service = COMPOSE["services"]["kafka-principals"]
    directory = service["command"][service["command"].index("--credentials") + 1]
    secrets = _secrets(service)
    for each in PRINCIPALS:
        source = secrets[f"{directory}/{each.name}.password"]
        assert COMPOSE["secrets"][source]["file"] == f"./config/kafka/{each.name}.password"


def test_the_broker_runs_the_secured_configuration_of_the_local_broker() -> None:
    kafka = COMPOSE["services"]["kafka"]
    script = kafka["command"][-1].replace("/opt/rewardstream/", "")
    assert (ROOT / script).is_file()
    assert "./infra:/opt/rewardstream/infra:ro" in kafka["volumes"]
    assert COMPOSE["secrets"][_secrets(kafka)["/run/secrets/kafka.password"]]["file"] == \
        "./config/kafka/admin.password"

"""The principals table: the ACLs it gives, the policy it must keep, the consumer groups the
code really uses, and the copy of it in docs/security.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.principals import PRINCIPALS, AclGrant, Principal, acl_grants, principal
from infra.settings import Settings
from schemas.topics import TOPICS
from streams.monitors.app import create_app
from streams.monitors.config import MonitorConfig
from streams.monitors.delivery import _GROUP as ALERT_DELIVERY_GROUP
from streams.spec import load_spec
from streams.worker import default_app_id
from trainer.config import TrainConfig

SECURITY_DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"


def _writers(topic: str) -> set[str]:
    return {p.name for p in PRINCIPALS if topic in p.writes}


def test_grants_are_the_row_under_the_deployment_prefix() -> None:
    assert set(acl_grants(principal("ingest"), "prod.")) == {
        AclGrant("ingest", "TOPIC", "prod.events.raw", "LITERAL", "WRITE"),
        AclGrant("ingest", "TOPIC", "prod.events.deadletter", "LITERAL", "WRITE"),
        AclGrant("ingest", "TOPIC", "prod.events.raw", "LITERAL", "READ"),
        AclGrant("ingest", "TOPIC", "prod.events.raw", "LITERAL", "DESCRIBE_CONFIGS"),
        AclGrant("ingest", "TOPIC", "prod.events.deadletter", "LITERAL", "DESCRIBE_CONFIGS"),
    }
    worker = acl_grants(principal("reward-worker"), "prod.")
    assert AclGrant("reward-worker", "GROUP", "prod.rewardjoin-", "PREFIXED", "READ") in worker
    assert AclGrant("reward-worker", "TOPIC", "changelog__prod.rewardjoin-", "PREFIXED",
                    "ALL") in worker
    assert not [g for g in worker if g.name.endswith("checkpoints")]


def test_a_row_naming_an_unknown_topic_is_an_error() -> None:
    with pytest.raises(KeyError, match="unknown topic 'event.raw'"):
        acl_grants(Principal("typo", "x", writes=("event.raw",), reads=()), "")
    with pytest.raises(KeyError, match="known: ingest, gateway"):
        principal("nobody")


def test_the_table_keeps_the_write_policy() -> None:
    assert _writers("events.raw") == {"ingest", "gateway"}
    assert _writers("events.deadletter") == {"ingest"}
    assert _writers("rewards") == {"reward-worker"} == _writers("events.late")
    # The trainer and its gate, staff through the console, the detectors' auto-protect rollback.
    assert _writers("checkpoints") == {"trainer", "console", "monitors"}
    assert _writers("metrics") == {"monitors"}
    assert _writers("alerts") == {"monitors", "console"}
    # Every consumer may quarantine what it cannot use, except ingest, which only reads its own
    # appends back for their ids.
    assert _writers("quarantine") == {p.name for p in PRINCIPALS if p.reads} - {"ingest"}


def _allowed(grants: list[AclGrant], resource: str, name: str, operation: str) -> bool:
    return any(g.resource == resource and g.operation in (operation, "ALL")
               and (g.name == name if g.pattern == "LITERAL" else name.startswith(g.name))
               for g in grants)


def test_the_consumer_groups_the_code_uses_are_granted() -> None:
    settings = Settings(topic_prefix="prod.")
    worker = acl_grants(principal("reward-worker"), settings.topic_prefix)
    group = default_app_id(settings, load_spec())
    assert _allowed(worker, "GROUP", group, "READ")
    assert _allowed(worker, "TOPIC", f"{group}-state-changelog", "WRITE")  # faust's table
    monitors = acl_grants(principal("monitors"), settings.topic_prefix)
    app_id = create_app(settings, MonitorConfig()).conf.id
    assert _allowed(monitors, "GROUP", app_id, "READ")
    assert _allowed(monitors, "TOPIC", f"{app_id}-monitor-reward-windows-changelog", "WRITE")
    assert _allowed(monitors, "GROUP", ALERT_DELIVERY_GROUP, "READ")
    trainer = acl_grants(principal("trainer"), settings.topic_prefix)
    assert _allowed(trainer, "GROUP", TrainConfig.group_id, "READ")
    assert not _allowed(trainer, "GROUP", group, "READ")


def _cell(names: tuple[str, ...]) -> str:
    return ", ".join(f"`{n.replace('{prefix}', '<prefix>')}`" for n in names) or "—"


def test_the_documented_table_is_the_table_in_code() -> None:
    section = SECURITY_DOC.read_text().split("\n## Kafka principals and ACLs\n", 1)[1]
    lines = section.split("\n\n| principal |", 1)[1].split("\n\n", 1)[0].splitlines()
    rows = [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines[2:]]
    expected = [[f"`{p.name}`", ", ".join(f"`{c}`" for c in p.runs.split(", ")),
                 _cell(p.writes), _cell(p.reads), _cell(p.groups), _cell(p.owns)]
                for p in PRINCIPALS]
    assert rows == expected
    assert {spec.name for spec in TOPICS} == {t for p in PRINCIPALS for t in p.writes}

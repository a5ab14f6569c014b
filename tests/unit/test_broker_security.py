"""What a secured local broker adds to its configuration, and its password files."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from infra.broker_security import argument_file, is_secured, security_config
from infra.credentials import ensure_password, principal_settings
from infra.errors import BrokerError, ConfigError
from infra.settings import KafkaAuth, Settings


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_passwords_are_owner_only_made_once_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "credentials" / "ingest.password"
    first = ensure_password(path)
    assert (_mode(path), _mode(path.parent)) == (0o600, 0o700)
    assert ensure_password(path) == first and len(first) >= 32
    assert ensure_password(tmp_path / "credentials" / "gateway.password") != first
    path.write_text("\n")
    with pytest.raises(ConfigError, match="ingest.password is empty"):
        ensure_password(path)


def test_a_principal_without_a_password_file_names_the_command(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="kafka principals create"):
        principal_settings(Settings(kafka_data_dir=tmp_path), "ingest")


def test_a_secured_start_adds_scram_acls_and_admin_and_stays_secured(tmp_path: Path) -> None:
    settings = Settings(kafka_data_dir=tmp_path)
    assert security_config(settings, secure=False, formatted=False) == ("", [])
    overlay, scram = security_config(settings, secure=True, formatted=False)
    password = principal_settings(settings, "admin").kafka_auth.password
    assert password and is_secured(settings)
    lines = dict(line.split("=", 1) for line in overlay.splitlines()
                 if line and not line.startswith("#"))
    assert lines["authorizer.class.name"].endswith("StandardAuthorizer")
    assert lines["allow.everyone.if.no.acl.found"] == "false"
    assert lines["super.users"] == "User:admin"
    assert lines["listener.security.protocol.map"] == \
        "CONTROLLER:SASL_PLAINTEXT,PLAINTEXT:SASL_PLAINTEXT"
    assert f'password="{password}"' in lines[
        "listener.name.plaintext.scram-sha-512.sasl.jaas.config"]
    assert scram == ["--add-scram", f"SCRAM-SHA-256=[name=admin,password={password}]",
                     "--add-scram", f"SCRAM-SHA-512=[name=admin,password={password}]"]
    # Started again without asking: still secured, with the same admin.
    assert security_config(settings, secure=False, formatted=True) == (overlay, scram)


def test_plaintext_storage_cannot_become_secured(tmp_path: Path) -> None:
    with pytest.raises(BrokerError, match="formatted without security"):
        security_config(Settings(kafka_data_dir=tmp_path), secure=True, formatted=True)
    assert not is_secured(Settings(kafka_data_dir=tmp_path))


def test_java_arguments_go_through_an_owner_only_file_removed_after(tmp_path: Path) -> None:
    with argument_file(tmp_path, ["format", 'a "quoted" arg', "C:\\x"]) as path:
        assert _mode(path) == 0o600
        assert path.read_text() == '"format"\n"a \\"quoted\\" arg"\n"C:\\\\x"\n'
    assert not path.exists()


def test_a_principal_keeps_the_deployments_protocol_and_mechanism(tmp_path: Path) -> None:
    ensure_password(tmp_path / "trainer.password")
    local = principal_settings(Settings(), "trainer", tmp_path).kafka_auth
    assert (local.security_protocol, local.sasl_mechanism, local.username) == \
        ("SASL_PLAINTEXT", "SCRAM-SHA-512", "trainer")
    deployed = Settings(kafka_auth=KafkaAuth("SASL_SSL", "SCRAM-SHA-256", "admin", "x",
                                             ssl_cafile=tmp_path / "ca.pem"))
    auth = principal_settings(deployed, "trainer", tmp_path).kafka_auth
    assert (auth.security_protocol, auth.sasl_mechanism, auth.ssl_cafile) == \
        ("SASL_SSL", "SCRAM-SHA-256", tmp_path / "ca.pem")
    assert (auth.username, auth.password_file) == ("trainer", tmp_path / "trainer.password")
    assert auth.password == (tmp_path / "trainer.password").read_text().strip()

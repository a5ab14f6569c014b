"""Kafka client security settings: read from the environment with errors that name the variable,
turned into each client library's options, handed on to children, never shown in a repr."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from faust.types.auth import AuthProtocol, SASLMechanism

from infra.errors import ConfigError
from infra.kafka_auth import (
    client_env,
    faust_options,
    librdkafka_options,
    python_client_options,
)
from infra.settings import load_settings

_VARS = ("REWARDSTREAM_KAFKA_SECURITY_PROTOCOL", "REWARDSTREAM_KAFKA_SASL_MECHANISM",
         "REWARDSTREAM_KAFKA_USERNAME", "REWARDSTREAM_KAFKA_PASSWORD",
         "REWARDSTREAM_KAFKA_PASSWORD_FILE", "REWARDSTREAM_KAFKA_SSL_CAFILE",
         "REWARDSTREAM_BOOTSTRAP_SERVERS", "REWARDSTREAM_TOPIC_PREFIX")
_SECRET = "s3cret-Zq9-never-shown"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _VARS:
        monkeypatch.delenv(name, raising=False)


def _sasl(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, mechanism: str = "scram-sha-256",
          protocol: str = "SASL_PLAINTEXT") -> Path:
    secret = tmp_path / "ingest.password"
    secret.write_text(_SECRET + "\n")
    monkeypatch.setenv("REWARDSTREAM_KAFKA_SECURITY_PROTOCOL", protocol)
    monkeypatch.setenv("REWARDSTREAM_KAFKA_SASL_MECHANISM", mechanism)
    monkeypatch.setenv("REWARDSTREAM_KAFKA_USERNAME", "ingest")
    monkeypatch.setenv("REWARDSTREAM_KAFKA_PASSWORD_FILE", str(secret))
    monkeypatch.setenv("REWARDSTREAM_BOOTSTRAP_SERVERS", "k1:9092,k2:9092")
    return secret


def test_plaintext_by_default_adds_nothing_but_the_brokers() -> None:
    settings = load_settings()
    assert not settings.kafka_auth.sasl
    assert python_client_options(settings) == {"bootstrap_servers": settings.bootstrap_servers}
    assert faust_options(settings) == {"broker": f"kafka://{settings.bootstrap_servers}"}
    assert librdkafka_options(settings) == {"bootstrap.servers": settings.bootstrap_servers,
                                           "security.protocol": "PLAINTEXT"}


def test_scram_settings_reach_every_client_family(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    _sasl(monkeypatch, tmp_path)
    settings = load_settings()
    assert settings.kafka_auth.sasl_mechanism == "SCRAM-SHA-256"  # case-insensitive
    assert python_client_options(settings) == {
        "bootstrap_servers": "k1:9092,k2:9092", "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": "ingest",
        "sasl_plain_password": _SECRET}
    assert librdkafka_options(settings) == {
        "bootstrap.servers": "k1:9092,k2:9092", "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": "ingest", "sasl.password": _SECRET}
    faust = faust_options(settings)
    credentials = faust["broker_credentials"]
    assert faust["broker"] == "kafka://k1:9092,k2:9092"
    assert (credentials.protocol, credentials.mechanism) == (AuthProtocol.SASL_PLAINTEXT,
                                                             SASLMechanism.SCRAM_SHA_256)
    assert (credentials.username, credentials.password) == ("ingest", _SECRET)


def test_sasl_ssl_carries_a_tls_context_to_each_family(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    _sasl(monkeypatch, tmp_path, protocol="SASL_SSL")
    settings = load_settings()
    assert isinstance(python_client_options(settings)["ssl_context"], ssl.SSLContext)
    assert faust_options(settings)["broker_credentials"].protocol == AuthProtocol.SASL_SSL
    assert librdkafka_options(settings)["security.protocol"] == "SASL_SSL"


def test_the_password_is_in_no_repr(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _sasl(monkeypatch, tmp_path)
    settings = load_settings()
    assert settings.kafka_auth.password == _SECRET
    assert _SECRET not in repr(settings)
    assert _SECRET not in str(settings.kafka_auth)
    assert _SECRET not in repr(faust_options(settings)["broker_credentials"])
    monkeypatch.delenv("REWARDSTREAM_KAFKA_PASSWORD_FILE")
    monkeypatch.setenv("REWARDSTREAM_KAFKA_PASSWORD", _SECRET)
    assert _SECRET not in repr(load_settings())


def test_a_child_environment_rebuilds_the_same_settings(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    secret = _sasl(monkeypatch, tmp_path)
    settings = load_settings()
    env = client_env(settings)
    assert env["REWARDSTREAM_KAFKA_PASSWORD_FILE"] == str(secret)
    assert "REWARDSTREAM_KAFKA_PASSWORD" not in env  # the file, not the password itself
    for name in _VARS:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert load_settings().kafka_auth == settings.kafka_auth


@pytest.mark.parametrize(("variables", "named"), [
    ({"REWARDSTREAM_KAFKA_SECURITY_PROTOCOL": "SSL"}, "REWARDSTREAM_KAFKA_SECURITY_PROTOCOL='SSL'"),
    ({"REWARDSTREAM_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
      "REWARDSTREAM_KAFKA_SASL_MECHANISM": "PLAIN"}, "REWARDSTREAM_KAFKA_SASL_MECHANISM='PLAIN'"),
    ({"REWARDSTREAM_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
      "REWARDSTREAM_KAFKA_PASSWORD": "x"}, "REWARDSTREAM_KAFKA_USERNAME is not set"),
    ({"REWARDSTREAM_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
      "REWARDSTREAM_KAFKA_USERNAME": "ingest"}, "REWARDSTREAM_KAFKA_PASSWORD_FILE (or"),
    ({"REWARDSTREAM_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
      "REWARDSTREAM_KAFKA_USERNAME": "ingest",
      "REWARDSTREAM_KAFKA_PASSWORD_FILE": "/nonexistent/ingest.password"},
     "REWARDSTREAM_KAFKA_PASSWORD_FILE='/nonexistent/ingest.password' cannot be read"),
])
def test_bad_security_settings_name_the_variable(monkeypatch: pytest.MonkeyPatch,
                                                 variables: dict[str, str], named: str) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as error:
        load_settings()
    assert named in str(error.value)


def test_an_empty_password_file_is_refused(monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    _sasl(monkeypatch, tmp_path).write_text("\n")
    with pytest.raises(ConfigError, match="ingest.password' is empty"):
        load_settings()

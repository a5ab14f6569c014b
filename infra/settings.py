"""Deployment settings, read from ``REWARDSTREAM_*`` environment variables.

Every process of the platform (CLI, services, workers, tests) reads the same variables, so one
exported environment points all of them at the same broker and topic prefix.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from infra.errors import ConfigError

__all__ = ["MAX_LOCAL_BROKERS", "SASL_MECHANISMS", "SECURITY_PROTOCOLS", "KafkaAuth", "Settings",
           "cache_dir", "load_kafka_auth", "load_settings"]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def cache_dir() -> Path:
    """Where downloaded jars and other re-creatable artefacts live (outside any checkout)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(os.environ.get("REWARDSTREAM_CACHE_DIR", str(Path(base) / "rewardstream")))


def _int_env(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not an integer") from None


@dataclass(frozen=True)
class KafkaAuth:
    """How clients authenticate to the brokers; ``infra.kafka_auth`` turns it into each client
    library's options. The password never appears in a repr."""

    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "SCRAM-SHA-512"
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    password_file: Path | None = None  # where the password came from, handed on to children
    ssl_cafile: Path | None = None  # SASL_SSL: the CA bundle (default: the system's)

    @property
    def sasl(self) -> bool:
        return self.security_protocol != "PLAINTEXT"


def _choice_env(name: str, default: str, choices: tuple[str, ...]) -> str:
    raw = os.environ.get(name) or default
    if raw.upper() not in choices:
        raise ConfigError(f"{name}={raw!r} is not one of {', '.join(choices)}")
    return raw.upper()


def _password_env() -> tuple[str | None, Path | None]:
    path = os.environ.get("REWARDSTREAM_KAFKA_PASSWORD_FILE")
    if not path:
        return os.environ.get("REWARDSTREAM_KAFKA_PASSWORD") or None, None
    try:
        password = Path(path).read_text().strip()
    except OSError as exc:
        raise ConfigError(f"REWARDSTREAM_KAFKA_PASSWORD_FILE={path!r} cannot be read "
                          f"({exc.strerror})") from None
    if not password:
        raise ConfigError(f"REWARDSTREAM_KAFKA_PASSWORD_FILE={path!r} is empty")
    return password, Path(path)


def load_kafka_auth() -> KafkaAuth:
    """Client authentication from ``REWARDSTREAM_KAFKA_*``; SASL needs a username and a
    password (``REWARDSTREAM_KAFKA_PASSWORD_FILE`` or ``REWARDSTREAM_KAFKA_PASSWORD``)."""
    protocol = _choice_env("REWARDSTREAM_KAFKA_SECURITY_PROTOCOL", "PLAINTEXT",
                           SECURITY_PROTOCOLS)
    mechanism = _choice_env("REWARDSTREAM_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512",
                            SASL_MECHANISMS)
    if protocol == "PLAINTEXT":
        return KafkaAuth()
    username = os.environ.get("REWARDSTREAM_KAFKA_USERNAME") or None
    password, password_file = _password_env()
    if username is None:
        raise ConfigError(f"REWARDSTREAM_KAFKA_USERNAME is not set; {protocol} needs it")
    if password is None:
        raise ConfigError(f"REWARDSTREAM_KAFKA_PASSWORD_FILE (or REWARDSTREAM_KAFKA_PASSWORD) "
                          f"is not set; {protocol} needs the password of {username!r}")
    cafile = os.environ.get("REWARDSTREAM_KAFKA_SSL_CAFILE") or None
    if cafile is not None and not Path(cafile).is_file():
        raise ConfigError(f"REWARDSTREAM_KAFKA_SSL_CAFILE={cafile!r} is not a file")
    return KafkaAuth(protocol, mechanism, username, password, password_file,
                     Path(cafile) if cafile else None)


@dataclass(frozen=True)
class Settings:
    """Where the broker lives and how topics are named."""

    kafka_port: int = 19092
    kafka_controller_port: int = 19093
    kafka_data_dir: Path = field(default_factory=lambda: cache_dir() / "kafka-data")
    kafka_heap_mb: int = 512  # per node
    kafka_brokers: int = 1  # local nodes; node i (from 0) listens on port + 2i, controller + 2i
    topic_prefix: str = ""
    topic_partitions: int = 1
    external_bootstrap: str | None = None
    kafka_auth: KafkaAuth = field(default_factory=KafkaAuth)

    @property
    def bootstrap_servers(self) -> str:
        """A deployment's brokers when given, else every local node on loopback."""
        return self.external_bootstrap or ",".join(
            f"127.0.0.1:{self.kafka_port + 2 * i}" for i in range(self.kafka_brokers))


MAX_LOCAL_BROKERS = 5


def load_settings() -> Settings:
    """Settings from the environment, with defaults for a single-machine setup."""
    defaults = Settings()
    brokers = _int_env("REWARDSTREAM_KAFKA_BROKERS", defaults.kafka_brokers)
    if not 1 <= brokers <= MAX_LOCAL_BROKERS:
        raise ConfigError(f"REWARDSTREAM_KAFKA_BROKERS={brokers} must be between 1 and "
                          f"{MAX_LOCAL_BROKERS}")
    data_dir = os.environ.get("REWARDSTREAM_KAFKA_DATA_DIR")
    return Settings(
        kafka_port=_int_env("REWARDSTREAM_KAFKA_PORT", defaults.kafka_port),
        kafka_controller_port=_int_env(
            "REWARDSTREAM_KAFKA_CONTROLLER_PORT", defaults.kafka_controller_port
        ),
        kafka_data_dir=Path(data_dir) if data_dir else defaults.kafka_data_dir,
        kafka_heap_mb=_int_env("REWARDSTREAM_KAFKA_HEAP_MB", defaults.kafka_heap_mb),
        kafka_brokers=brokers,
        topic_prefix=os.environ.get("REWARDSTREAM_TOPIC_PREFIX", defaults.topic_prefix),
        topic_partitions=_int_env("REWARDSTREAM_TOPIC_PARTITIONS", defaults.topic_partitions),
        external_bootstrap=os.environ.get("REWARDSTREAM_BOOTSTRAP_SERVERS") or None,
        kafka_auth=load_kafka_auth(),
    )

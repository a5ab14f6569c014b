"""Deployment settings, read from ``REWARDSTREAM_*`` environment variables.

Every process of the platform (CLI, services, workers, tests) reads the same variables, so one
exported environment points all of them at the same broker and topic prefix.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from infra.errors import ConfigError

__all__ = ["Settings", "cache_dir", "load_settings"]


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
class Settings:
    """Where the broker lives and how topics are named."""

    kafka_port: int = 19092
    kafka_controller_port: int = 19093
    kafka_data_dir: Path = field(default_factory=lambda: cache_dir() / "kafka-data")
    kafka_heap_mb: int = 512
    topic_prefix: str = ""
    topic_partitions: int = 1
    external_bootstrap: str | None = None

    @property
    def bootstrap_servers(self) -> str:
        """A deployment's brokers when given, else the local broker on loopback."""
        return self.external_bootstrap or f"127.0.0.1:{self.kafka_port}"


def load_settings() -> Settings:
    """Settings from the environment, with defaults for a single-machine setup."""
    defaults = Settings()
    data_dir = os.environ.get("REWARDSTREAM_KAFKA_DATA_DIR")
    return Settings(
        kafka_port=_int_env("REWARDSTREAM_KAFKA_PORT", defaults.kafka_port),
        kafka_controller_port=_int_env(
            "REWARDSTREAM_KAFKA_CONTROLLER_PORT", defaults.kafka_controller_port
        ),
        kafka_data_dir=Path(data_dir) if data_dir else defaults.kafka_data_dir,
        kafka_heap_mb=_int_env("REWARDSTREAM_KAFKA_HEAP_MB", defaults.kafka_heap_mb),
        topic_prefix=os.environ.get("REWARDSTREAM_TOPIC_PREFIX", defaults.topic_prefix),
        topic_partitions=_int_env("REWARDSTREAM_TOPIC_PARTITIONS", defaults.topic_partitions),
        external_bootstrap=os.environ.get("REWARDSTREAM_BOOTSTRAP_SERVERS") or None,
    )

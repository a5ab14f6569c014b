"""The settings of ``rewardstream up``: one TOML file, each setting overridable by an environment
variable (the variable wins), every one with a default.

Each setting is declared once in :data:`SETTINGS` with its file key (``section.name``), its
variable, its type, default and meaning; the shipped ``infra/rewardstream.example.toml`` shows
them all, and a test checks the two agree. Relative paths are relative to the settings file's
directory (the working directory without a file).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.errors import ConfigError
from infra.ports import DEFAULT_PORTS
from infra.settings import cache_dir

__all__ = ["SETTINGS", "Setting", "StackSettings", "load_stack_settings"]


@dataclass(frozen=True)
class Setting:
    key: str  # in the file: "section.name", or "name" at the top
    env: str
    kind: type  # str, int, bool, Path or list (of strings; comma-separated in the variable)
    default: Any
    meaning: str

    @property
    def is_port(self) -> bool:
        return self.key.endswith("port")


SETTINGS = (
    Setting("profile", "REWARDSTREAM_PROFILE", str, "production", "monitor settings to start "
            "from: production (windows of a minute, 300 baseline samples) or trial (10 s "
            "windows, 15 samples: a first trial, where a checkpoint serves minutes of traffic)"),
    Setting("run_dir", "REWARDSTREAM_RUN_DIR", Path, Path("run"), "state, logs, keys, "
            "secrets and the services' local state"),
    Setting("host", "REWARDSTREAM_HOST", str, "127.0.0.1", "the interface every service "
            "listens on (0.0.0.0 for all)"),
    Setting("kafka.bootstrap_servers", "REWARDSTREAM_BOOTSTRAP_SERVERS", str, "", "a given "
            "cluster (host:9092,...); empty: a local broker, started unless it runs"),
    Setting("kafka.port", "REWARDSTREAM_KAFKA_PORT", int, 19092, "the local broker's port"),
    Setting("kafka.controller_port", "REWARDSTREAM_KAFKA_CONTROLLER_PORT", int, 19093,
            "the local broker's controller port"),
    Setting("kafka.data_dir", "REWARDSTREAM_KAFKA_DATA_DIR", Path, None, "the local broker's "
            "data (default ~/.cache/rewardstream/kafka-data)"),
    Setting("kafka.topic_prefix", "REWARDSTREAM_TOPIC_PREFIX", str, "", "put before every "
            "topic name"),
    Setting("kafka.partitions", "REWARDSTREAM_TOPIC_PARTITIONS", int, 1, "partitions of the "
            "topics it creates"),
    Setting("keys.org", "REWARDSTREAM_KEYS_ORG", str, "default", "the org of the first ingest "
            "key (and gateway key)"),
    Setting("keys.staff", "REWARDSTREAM_KEYS_STAFF", str, "admin", "the staff member of the "
            "first console key, which sees every org"),
    Setting("ingest.port", "REWARDSTREAM_INGEST_PORT", int, DEFAULT_PORTS["ingest"],
            "ingest's API"),
    Setting("console.port", "REWARDSTREAM_CONSOLE_PORT", int, DEFAULT_PORTS["console"],
            "the console"),
    Setting("worker.metrics_port", "REWARDSTREAM_WORKER_METRICS_PORT", int,
            DEFAULT_PORTS["worker"], "the reward worker's /metrics and /readyz"),
    Setting("archiver.enabled", "REWARDSTREAM_ARCHIVER_ENABLED", bool, True, "archive "
            "events.raw to Parquet"),
    Setting("archiver.dir", "REWARDSTREAM_ARCHIVER_DIR", Path, None, "where the archive is "
            "written (default: archive in the run directory)"),
    Setting("archiver.metrics_port", "REWARDSTREAM_ARCHIVER_METRICS_PORT", int,
            DEFAULT_PORTS["archiver"], "the archiver's /metrics and /readyz"),
    Setting("monitors.config", "REWARDSTREAM_MONITORS_CONFIG", Path, None, "a YAML file of "
            "detector settings over the profile's"),
    Setting("monitors.metrics_port", "REWARDSTREAM_MONITORS_METRICS_PORT", int,
            DEFAULT_PORTS["monitors-metrics"], "the metrics worker's /metrics and /readyz"),
    Setting("monitors.detect_metrics_port", "REWARDSTREAM_MONITORS_DETECT_METRICS_PORT", int,
            DEFAULT_PORTS["monitors-detect"], "the detectors' /metrics and /readyz"),
    Setting("alerts.alertmanager", "REWARDSTREAM_ALERTS_ALERTMANAGER", list, [],
            "Alertmanager base URLs alerts are pushed to"),
    Setting("alerts.webhooks", "REWARDSTREAM_ALERTS_WEBHOOKS", list, [], "webhook URLs that "
            "get Alertmanager-style JSON"),
    Setting("alerts.metrics_port", "REWARDSTREAM_ALERTS_METRICS_PORT", int,
            DEFAULT_PORTS["alert-delivery"], "alert delivery's /metrics and /readyz"),
    Setting("gateway.enabled", "REWARDSTREAM_GATEWAY_ENABLED", bool, False, "serve a model "
            "through the gateway (needs model_dir)"),
    Setting("gateway.model_dir", "REWARDSTREAM_GATEWAY_MODEL_DIR", Path, None, "a local "
            "Hugging Face causal LM, served by the built-in torch engine"),
    Setting("gateway.port", "REWARDSTREAM_GATEWAY_PORT", int, DEFAULT_PORTS["gateway"],
            "the gateway's OpenAI-compatible API"),
    Setting("trainer.enabled", "REWARDSTREAM_TRAINER_ENABLED", bool, False, "run the trainer "
            "continuously (needs config)"),
    Setting("trainer.config", "REWARDSTREAM_TRAINER_CONFIG", Path, None, "the trainer's TOML "
            "settings (docs/trainer-and-release.md)"),
    Setting("trainer.metrics_port", "REWARDSTREAM_TRAINER_METRICS_PORT", int,
            DEFAULT_PORTS["trainer"], "the trainer's /metrics and /readyz"),
)
_BY_KEY = {setting.key: setting for setting in SETTINGS}
_PROFILES = ("production", "trial")
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


@dataclass(frozen=True)
class StackSettings:
    """Resolved settings: ``values`` by key, paths absolute; ``file`` where they came from."""

    values: Mapping[str, Any]
    file: Path | None

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def where(self, key: str) -> str:
        """How a person changes ``key``: in the file, or with its variable."""
        setting = _BY_KEY[key]
        place = f"{key} in {self.file}" if self.file is not None else f"{key} in a settings file"
        return f"{place} (or {setting.env})"

    @property
    def run_dir(self) -> Path:
        return Path(self.values["run_dir"])

    @property
    def ports(self) -> dict[str, int]:
        """Every port setting a service of this deployment listens on, by key."""
        return {s.key: self.values[s.key] for s in SETTINGS if s.is_port
                and not s.key.startswith("kafka.")}


def _flatten(table: Mapping[str, Any], file: Path) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for name, value in table.items():
        if isinstance(value, dict):
            for inner, item in value.items():
                flat[f"{name}.{inner}"] = item
        else:
            flat[name] = value
    unknown = sorted(set(flat) - set(_BY_KEY))
    if unknown:
        raise ConfigError(f"{file}: unknown setting(s) {', '.join(unknown)}; known: "
                          f"{', '.join(_BY_KEY)}")
    return flat


def _from_env(setting: Setting, raw: str) -> Any:
    if setting.kind is list:
        return [part.strip() for part in raw.split(",") if part.strip()]
    if setting.kind is bool:
        if raw.strip().lower() not in (*_TRUE, *_FALSE):
            raise ConfigError(f"{setting.env}={raw!r}: write true or false")
        return raw.strip().lower() in _TRUE
    if setting.kind is int:
        try:
            return int(raw)
        except ValueError:
            raise ConfigError(f"{setting.env}={raw!r} is not an integer") from None
    return raw


def _checked(setting: Setting, value: Any, source: str, base: Path) -> Any:
    if value is None or (setting.kind is Path and value == ""):
        return None
    if setting.kind is Path:
        if not isinstance(value, str | Path):
            raise ConfigError(f"{source}: {setting.key} must be a path, got {value!r}")
        path = Path(value).expanduser()
        return path if path.is_absolute() else (base / path).resolve()
    if setting.kind is list:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{source}: {setting.key} must be a list of strings")
        return value
    if not isinstance(value, setting.kind) or (setting.kind is int and isinstance(value, bool)):
        raise ConfigError(f"{source}: {setting.key} must be {setting.kind.__name__}, got "
                          f"{value!r}")
    return value


def load_stack_settings(file: Path | None, env: Mapping[str, str] | None = None
                        ) -> StackSettings:
    """Defaults, then ``file`` (TOML; None: none), then the environment's variables."""
    env = os.environ if env is None else env
    raw: dict[str, Any] = {}
    if file is not None:
        try:
            raw = _flatten(tomllib.loads(file.read_text()), file)
        except OSError as exc:
            raise ConfigError(f"cannot read the settings file {file}: {exc.strerror}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{file} is not valid TOML: {exc}") from None
    base = file.resolve().parent if file is not None else Path.cwd()
    values: dict[str, Any] = {}
    for setting in SETTINGS:
        value, source = setting.default, "the default"
        if setting.key in raw:
            value, source = raw[setting.key], str(file)
        if env.get(setting.env, "") != "" or (setting.env in env and setting.kind is str):
            value, source = _from_env(setting, env[setting.env]), setting.env
        values[setting.key] = _checked(setting, value, source, base)
    if values["kafka.data_dir"] is None:
        values["kafka.data_dir"] = cache_dir() / "kafka-data"
    if values["archiver.dir"] is None:
        values["archiver.dir"] = values["run_dir"] / "archive"
    if values["profile"] not in _PROFILES:
        raise ConfigError(f"profile {values['profile']!r}: one of {', '.join(_PROFILES)}")
    for name in ("gateway.model_dir", "trainer.config"):
        service = name.split(".")[0]
        if values[f"{service}.enabled"] and values[name] is None:
            raise ConfigError(f"{service}.enabled needs {name}: set it in the settings file "
                              f"(or {_BY_KEY[name].env})")
    return StackSettings(values, file.resolve() if file is not None else None)

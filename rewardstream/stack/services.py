"""What ``rewardstream up`` runs: one entry per service, in the order they start.

Each entry names the setting of the port its ``/readyz`` and ``/metrics`` answer on (an API's
port, or a worker's metrics port) and makes its ``rewardstream`` arguments from the settings and
the run directory. A new service is one more entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rewardstream.stack.settings import StackSettings

__all__ = ["SERVICES", "RunDir", "ServiceEntry", "enabled_services"]


@dataclass(frozen=True)
class RunDir:
    """The run directory's layout."""

    path: Path

    @property
    def logs(self) -> Path:
        return self.path / "logs"

    @property
    def keys(self) -> Path:
        return self.path / "keys"

    @property
    def secrets(self) -> Path:
        return self.path / "secrets"

    @property
    def local_state(self) -> Path:
        return self.path / "state"

    @property
    def state_file(self) -> Path:
        return self.path / "up.json"

    @property
    def up_log(self) -> Path:
        return self.path / "up.log"


Arguments = Callable[[StackSettings, RunDir], list[str]]


@dataclass(frozen=True)
class ServiceEntry:
    name: str
    port: str  # the setting of the port its /readyz and /metrics answer on
    arguments: Arguments
    api: bool = False  # the port is an API people and clients use (printed as its address)
    enabled: Callable[[StackSettings], bool] = lambda _: True

    def url(self, settings: StackSettings, path: str = "") -> str:
        return _url(settings, self.port) + path


def _url(settings: StackSettings, port: str) -> str:
    host = settings["host"]
    return f"http://{'127.0.0.1' if host == '0.0.0.0' else host}:{settings[port]}"


def _metrics(settings: StackSettings, port: str) -> list[str]:
    return ["--metrics-port", str(settings[port]), "--metrics-host", settings["host"]]


def _listen(settings: StackSettings, port: str) -> list[str]:
    return ["--host", settings["host"], "--port", str(settings[port])]


def _monitor_config(settings: StackSettings) -> list[str]:
    config = settings["monitors.config"]
    return ["--profile", settings["profile"], *(["--config", str(config)] if config else [])]


SERVICES: tuple[ServiceEntry, ...] = (
    ServiceEntry("ingest", "ingest.port", lambda s, _: [
        "serve", "ingest", *_listen(s, "ingest.port")], api=True),
    ServiceEntry("worker", "worker.metrics_port", lambda s, run: [
        "worker", "--datadir", str(run.local_state / "worker"),
        *_metrics(s, "worker.metrics_port")]),
    ServiceEntry("archiver", "archiver.metrics_port", lambda s, _: [
        "archive", "--out", str(s["archiver.dir"]), *_metrics(s, "archiver.metrics_port")],
        enabled=lambda s: bool(s["archiver.enabled"])),
    ServiceEntry("monitors-metrics", "monitors.metrics_port", lambda s, run: [
        "monitors", "metrics", *_monitor_config(s), "--store", "rocksdb://", "--datadir",
        str(run.local_state / "monitors"), *_metrics(s, "monitors.metrics_port")]),
    ServiceEntry("monitors-detect", "monitors.detect_metrics_port", lambda s, _: [
        "monitors", "detect", *_monitor_config(s), *_metrics(s, "monitors.detect_metrics_port")]),
    ServiceEntry("alert-delivery", "alerts.metrics_port", lambda s, _: [
        "alerts", "deliver", *(f"--alertmanager={url}" for url in s["alerts.alertmanager"]),
        *(f"--webhook={url}" for url in s["alerts.webhooks"]),
        "--console-url", _url(s, "console.port"), *_metrics(s, "alerts.metrics_port")]),
    ServiceEntry("console", "console.port", lambda s, _: [
        "serve", "console", *_listen(s, "console.port")], api=True),
    ServiceEntry("gateway", "gateway.port", lambda s, run: [
        "serve", "gateway", "--engine-model", str(s["gateway.model_dir"]),
        "--spool-dir", str(run.local_state / "gateway-spool"), *_listen(s, "gateway.port")],
        api=True, enabled=lambda s: bool(s["gateway.enabled"])),
    ServiceEntry("trainer", "trainer.metrics_port", lambda s, _: [
        "train", "--config", str(s["trainer.config"]), "--cycle",
        *_metrics(s, "trainer.metrics_port")], enabled=lambda s: bool(s["trainer.enabled"])),
)


def enabled_services(settings: StackSettings) -> list[ServiceEntry]:
    return [entry for entry in SERVICES if entry.enabled(settings)]

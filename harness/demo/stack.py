"""The platform's services for one demo run, under a fresh topic prefix.

Ingest and the gateway (each with a freshly made API key of org ``demo``), the reward-join
worker, the monitors' metrics worker and detectors (with the demo thresholds), the console (with
a fresh staff key that sees every org), the gateway (torch engine over the warm-started
policy, following ``checkpoints``; a running canary's share of the users, sticky, gets the
``canary`` arm) and the release controller, which starts each gated candidate's canary and
decides it by its sequential rule. The trainer runs in the demo's own process through its
cycle API.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from harness.demo.config import DEMO_MONITOR_THRESHOLDS, DemoConfig
from infra.supervisor import CLI, Supervisor, wait_http

__all__ = ["Stack", "start_stack"]


@dataclass
class Stack:
    services: Supervisor
    ingest_url: str
    gateway_url: str
    console_url: str
    staff_key: str
    api_key: str  # ingest's
    gateway_key: str


_NO_METRICS = ("--metrics-port", "0")


def _new_key(env: dict[str, str], keys_file: str, *options: str) -> str:
    """A new key from ``rewardstream keys create``, its entry added to ``keys_file``."""
    out = subprocess.run([*CLI, "keys", "create", "--file", keys_file, *options], env=env,
                         check=True, capture_output=True, text=True).stdout
    return next(line.split(":", 1)[1].strip() for line in out.splitlines()
                if line.startswith("key:"))


def service_env(topic_prefix: str, run_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "REWARDSTREAM_TOPIC_PREFIX": topic_prefix,
        "REWARDSTREAM_INGEST_KEYS_FILE": str(run_dir / "ingest-keys.json"),
        "REWARDSTREAM_GATEWAY_KEYS_FILE": str(run_dir / "gateway-keys.json"),
        "REWARDSTREAM_CONSOLE_KEYS_FILE": str(run_dir / "console-keys.json"),
        "REWARDSTREAM_INGEST_PSEUDONYM_SECRET": secrets.token_hex(16),
        # Two cores: one thread per service keeps them from fighting over both.
        "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
        "PYTHONUNBUFFERED": "1",
    })
    return env


def start_stack(config: DemoConfig, env: dict[str, str], policy_dir: Path,
                on_restart: Callable[[str, int, int], None] | None = None) -> Stack:
    """Start every service; returns once the HTTP ones answer, supervised from then on (a
    service that exits is restarted; ``on_restart`` hears of it). Stop with
    ``stack.services``."""
    run_dir = config.run_dir
    api_key = _new_key(env, env["REWARDSTREAM_INGEST_KEYS_FILE"], "--for", "ingest", "--org",
                       "demo", "--name", "demo-client", "--rate-per-s", "100000")
    gateway_key = _new_key(env, env["REWARDSTREAM_GATEWAY_KEYS_FILE"], "--for", "gateway",
                           "--org", "demo", "--name", "demo-agents", "--rate-per-s", "1000",
                           "--burst", "1000")
    staff_key = _new_key(env, env["REWARDSTREAM_CONSOLE_KEYS_FILE"], "--for", "console",
                         "--org", "*", "--name", "demo")
    monitor_config = run_dir / "monitors.yaml"
    monitor_config.write_text(yaml.safe_dump(DEMO_MONITOR_THRESHOLDS))
    # A service that keeps exiting fails the demo rather than restarting for ever.
    services = Supervisor(env, config.log_dir, max_restarts=5, on_restart=on_restart)
    urls = {name: f"http://127.0.0.1:{port}" for name, port in (
        ("ingest", config.ingest_port), ("gateway", config.gateway_port),
        ("console", config.console_port))}
    try:
        ingest = services.start("ingest", "serve", "ingest", "--port", str(config.ingest_port))
        gateway = services.start(
            "gateway", "serve", "gateway", "--engine-model", str(policy_dir.resolve()),
            "--port", str(config.gateway_port), "--default-max-tokens", "96",
            "--reference-temperature", str(config.temperature))
        # The workers' /metrics ports are off: two demos, or a demo beside `rewardstream up`,
        # would share them.
        services.start("worker", "worker", "--commit-interval-s", "0.5", "--datadir",
                       str(run_dir / "worker-state"), "--loglevel", "warning", *_NO_METRICS)
        services.start("monitors-metrics", "monitors", "metrics", "--config", str(monitor_config),
                       "--datadir", str(run_dir / "monitors-state"), *_NO_METRICS)
        services.start("monitors-detect", "monitors", "detect", "--config", str(monitor_config),
                       *_NO_METRICS)
        console = services.start("console", "serve", "console", "--port",
                                 str(config.console_port))
        rule = config.rule()
        services.start("release", "release", "run", "--share", f"{config.canary_share:g}",
                       "--margin", f"{rule.margin:g}", "--alpha", f"{rule.alpha:g}",
                       "--max-trajectories", str(rule.max_trajectories),
                       "--max-hours", f"{rule.max_duration_s / 3600:g}",
                       "--min-per-arm", str(rule.min_per_arm), "--look-interval-s", "2",
                       "--lookback-hours", "6")
        wait_http(urls["ingest"] + "/readyz", 90, ingest)
        wait_http(urls["gateway"] + "/readyz", 120, gateway)
        wait_http(urls["console"] + "/readyz", 90, console)
        services.supervise()
    except BaseException:
        services.stop_all()
        raise
    return Stack(services, urls["ingest"], urls["gateway"], urls["console"], staff_key, api_key,
                 gateway_key)

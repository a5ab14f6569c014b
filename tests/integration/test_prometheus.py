"""A real Prometheus (the Debian package) on the shipped infra/prometheus/prometheus.yml, its
ports moved to the test's, scrapes every service `rewardstream up` runs (the gateway and the
trainer enabled too): `up == 1` for each target, each service's metrics pass promtool's naming
lint, and after some traffic every query of the shipped Grafana dashboard returns a series."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from infra.settings import Settings
from rewardstream.stack.settings import SETTINGS
from rewardstream_telemetry import Telemetry, Trajectory
from tests.support.ports import free_port
from tests.support.up_stack import UpStack, start_up

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SCRAPE_CONFIG = ROOT / "infra" / "prometheus" / "prometheus.yml"
DASHBOARD = ROOT / "infra" / "grafana" / "dashboards" / "rewardstream.json"


def _binary(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{name} is required under CI=true (bash infra/bootstrap.sh test "
                        "installs the Debian package prometheus)")
        pytest.skip(f"no {name}: apt-get install prometheus")
    return found


def _moved_config(stack: UpStack, out: Path) -> tuple[Path, dict[str, str]]:
    """The shipped configuration with each target on the port the test gave its service
    (each target's port is a default of up's settings); and each job's target."""
    moves = {f"127.0.0.1:{s.default}": f"127.0.0.1:{stack.port(s.key)}" for s in SETTINGS
             if s.is_port and not s.key.startswith("kafka.")}
    config = yaml.safe_load(SCRAPE_CONFIG.read_text())
    targets = {}
    for job in config["scrape_configs"]:
        for static in job["static_configs"]:
            static["targets"] = [moves[target] for target in static["targets"]]
            targets[job["job_name"]] = static["targets"][0]
    out.write_text(yaml.safe_dump(config))
    return out, targets


@pytest.fixture
def prometheus_url(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """Where the test's Prometheus will listen, and its configuration file's path."""
    port = free_port()
    yield f"http://127.0.0.1:{port}", tmp_path / "prometheus.yml"


def _start_prometheus(binary: str, config: Path, url: str, data: Path,
                      log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen([binary, f"--config.file={config}",
                                 f"--storage.tsdb.path={data}",
                                 f"--web.listen-address={url.removeprefix('http://')}"],
                                stdout=out, stderr=subprocess.STDOUT)


def _query(url: str, expr: str) -> list[dict]:
    answer = httpx.get(f"{url}/api/v1/query", params={"query": expr}, timeout=10).json()
    assert answer["status"] == "success", (expr, answer)
    return list(answer["data"]["result"])


def _traffic(stack: UpStack, tmp_path: Path) -> None:
    """Trajectories through the SDK, one event ingest rejects, a completion through the
    gateway and a look at the console: what the dashboard's series need to exist."""
    keys = stack.directory / "run" / "keys"
    ingest = f"http://127.0.0.1:{stack.port('ingest.port')}"
    key = (keys / "ingest.key").read_text().strip()
    with Telemetry(ingest, key, queue_dir=tmp_path / "sdk-queue") as tel:
        for n in range(20):
            traj = Trajectory(f"traj-{n}", session_id="s", user=f"u{n}", checkpoint_id="base")
            tel.edit_proposed(traj, edit_id="e1", path="a.py", lines_added=1)
            tel.edit_decided(traj, edit_id="e1", decision="rejected")
            tel.trajectory_ended(traj, outcome="completed", turns=1)
        assert tel.flush(timeout_s=60)
    bad = httpx.post(f"{ingest}/v1/events", json=[{"type": "edit.decided"}],
                     headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert bad.status_code == 207 or bad.status_code == 400, bad.text
    gateway = f"http://127.0.0.1:{stack.port('gateway.port')}"
    served = httpx.post(f"{gateway}/v1/chat/completions", timeout=120, json={
        "model": "rewardstream", "max_tokens": 4, "user": "u1",
        "messages": [{"role": "user", "content": "hello"}]},
        headers={"Authorization": f"Bearer {(keys / 'gateway.key').read_text().strip()}",
                 "X-Rewardstream-Trajectory-Id": "traj-gw"})
    assert served.status_code == 200, served.text
    console = f"http://127.0.0.1:{stack.port('console.port')}"
    staff = (keys / "console.key").read_text().strip()
    assert httpx.get(f"{console}/api/alerts", headers={"X-Staff-Key": staff}).status_code == 200


def _dashboard_queries() -> list[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [(panel["title"], target["expr"]) for panel in dashboard["panels"]
            for target in panel.get("targets", [])]


@pytest.mark.timeout(1200)
def test_prometheus_scrapes_every_service_and_the_dashboard_has_its_series(
        kafka: Settings, tmp_path: Path, tiny_model_dir: Path,
        prometheus_url: tuple[str, Path]) -> None:
    binary, promtool = _binary("prometheus"), _binary("promtool")
    trainer_config = tmp_path / "trainer.toml"
    trainer_config.write_text(f'model_dir = "{tiny_model_dir}"\nout_dir = "{tmp_path / "ck"}"\n')
    stack = start_up(tmp_path / "deployment", kafka, f'''
[gateway]
enabled = true
model_dir = "{tiny_model_dir}"

[trainer]
enabled = true
config = "{trainer_config}"
''')
    url, config_path = prometheus_url
    prometheus = None
    try:
        config, targets = _moved_config(stack, config_path)
        prometheus = _start_prometheus(binary, config, url, tmp_path / "tsdb",
                                       tmp_path / "prometheus.log")
        _traffic(stack, tmp_path)
        deadline, scraped = time.monotonic() + 120, {}
        while time.monotonic() < deadline:
            try:
                scraped = {r["metric"]["job"]: r["value"][1] for r in _query(url, "up")}
            except httpx.HTTPError:
                scraped = {}
            if set(scraped) == set(targets) and set(scraped.values()) == {"1"}:
                break
            time.sleep(2)
        assert scraped == dict.fromkeys(targets, "1"), (scraped, stack.logs())
        for job, target in targets.items():
            text = httpx.get(f"http://{target}/metrics", timeout=10).text
            lint = subprocess.run([promtool, "check", "metrics"], input=text, text=True,
                                  capture_output=True)
            assert lint.returncode == 0, f"{job}: {lint.stdout}{lint.stderr}"
        queries = _dashboard_queries()
        deadline, empty = time.monotonic() + 240, queries
        while empty and time.monotonic() < deadline:
            empty = [(title, expr) for title, expr in queries if not _query(url, expr)]
            time.sleep(5)
        assert not empty, f"dashboard queries without a series: {empty}"
    finally:
        if prometheus is not None:
            prometheus.terminate()
            prometheus.wait(timeout=30)
        stack.down()

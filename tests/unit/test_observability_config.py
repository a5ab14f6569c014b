"""The shipped scrape configuration, dashboard, compose file and .env.example agree: every
Prometheus target is a service's default port, which `up` uses and compose publishes on the
host's loopback; every compose variable is described in .env.example; every image is pinned;
Grafana is provisioned with the dashboard and a data source of the uid its panels name."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from infra.ports import DEFAULT_PORTS

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
PROMETHEUS = yaml.safe_load((ROOT / "infra" / "prometheus" / "prometheus.yml").read_text())
DASHBOARD = json.loads((ROOT / "infra" / "grafana" / "dashboards" / "rewardstream.json")
                       .read_text())
_JOB_SERVICE = {"reward-worker": "worker"}  # job name → DEFAULT_PORTS / compose naming


def _targets() -> dict[str, int]:
    out = {}
    for job in PROMETHEUS["scrape_configs"]:
        [static] = job["static_configs"]
        [target] = static["targets"]
        host, port = target.split(":")
        assert host == "127.0.0.1", target
        out[job["job_name"]] = int(port)
    return out


def test_every_target_is_a_service_at_its_default_port_and_every_service_is_scraped() -> None:
    targets = _targets()
    assert {_JOB_SERVICE.get(job, job): port for job, port in targets.items()} == {
        name: port for name, port in DEFAULT_PORTS.items() if name != "engine"}


def test_compose_publishes_every_target_on_loopback_and_scrapes_with_the_shipped_config() -> None:
    published = set()
    for service in COMPOSE["services"].values():
        for mapping in service.get("ports", []):
            parts = str(mapping).split(":")
            published.add((parts[0] if len(parts) == 3 else "0.0.0.0", int(parts[-2])))
    for job, port in _targets().items():
        assert ("127.0.0.1", port) in published or ("0.0.0.0", port) in published, job
    prometheus = COMPOSE["services"]["prometheus"]
    assert prometheus["network_mode"] == "host"
    assert "./infra/prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in \
        prometheus["volumes"]
    assert COMPOSE["x-rewardstream"]["environment"]["REWARDSTREAM_METRICS_HOST"] == "0.0.0.0"


def test_every_compose_variable_is_described_in_the_env_example() -> None:
    used = set(re.findall(r"\$\{(\w+)", (ROOT / "docker-compose.yml").read_text()))
    example = (ROOT / ".env.example").read_text()
    described = set(re.findall(r"^(\w+)=", example, flags=re.MULTILINE))
    assert used == described
    for required in re.findall(r"\$\{(\w+):\?", (ROOT / "docker-compose.yml").read_text()):
        assert re.search(rf"^# Required\..*\n(#.*\n)*{required}=$", example, re.MULTILINE), \
            required


def test_every_image_is_pinned() -> None:
    # What is pulled; the platform's own image is built from this checkout.
    images = [s["image"] for s in COMPOSE["services"].values() if "image" in s
              and "build" not in s]
    for image in images:
        name, _, tag = image.rpartition(":")
        assert name and tag and tag != "latest", image
    assert any(image.startswith("vllm/vllm-openai:v") for image in images)


def test_grafana_is_provisioned_with_the_dashboard_and_its_data_source() -> None:
    grafana = COMPOSE["services"]["grafana"]
    mounts = {volume.split(":")[0]: volume.split(":")[1] for volume in grafana["volumes"]}
    assert mounts["./infra/grafana/dashboards"] == "/var/lib/grafana/dashboards"
    provisioning = ROOT / "infra" / "grafana" / "provisioning"
    [source] = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())[
        "datasources"]
    [provider] = yaml.safe_load((provisioning / "dashboards" / "rewardstream.yml").read_text())[
        "providers"]
    assert provider["options"]["path"] == "/var/lib/grafana/dashboards"
    uids = {target["datasource"]["uid"] for panel in DASHBOARD["panels"]
            for target in panel.get("targets", [])}
    assert uids == {source["uid"]} and source["type"] == "prometheus"
    assert len([p for p in DASHBOARD["panels"] if p.get("targets")]) >= 20

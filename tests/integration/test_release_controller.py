"""The release loop on the real broker and gateway: a candidate trained by `train` and an
adapter registered from a directory each go gate → canary → decision through `release run`,
every step on `checkpoints` with its evidence; the controller is SIGKILLed mid-canary and the
one started after it resumes the same canary from the log and decides it.

The gateway (torch engine over the tiny model, following the registry) assigns each user an
arm; a trajectory's reward record is written as the reward worker would, for the checkpoint
and arm the gateway served it with: its task's difficulty, noise, and the canary's effect
(+1 for the trained candidate, −1 for the registered one).
"""

from __future__ import annotations

import random
import signal
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from transformers import AutoTokenizer

from infra.models import build_random_adapter
from infra.settings import Settings
from schemas.checkpoints import CheckpointEvent
from serving.engine.cli import build_engine_app
from serving.gateway.app import GatewayConfig, create_gateway_app
from serving.gateway.backend import BackendClient
from serving.gateway.sinks import MemoryEventSink
from serving.local_server import serve_in_thread
from streams.release.plan import canary_evidence
from streams.release.service import read_fold
from tests.support.release import RewardWriter, cli, export_manifest, run_cli
from tests.support.service_keys import GATEWAY_HEADERS, gateway_auth
from tests.support.waits import wait_for
from trainer.registry_io import KafkaRegistryStore
from trainer.synthetic import synthetic_records

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(900)]
DEADLINE_S, POLL_S = 120.0, 0.3


class Traffic(RewardWriter):
    """Users through the gateway; each one's reward record on `rewards`."""

    def __init__(self, settings: Settings, gateway_url: str) -> None:
        super().__init__(settings)
        self.url, self.rng = gateway_url, random.Random(5)

    def users(self, count: int, canary_effect: float) -> Counter[tuple[str, str]]:
        served: Counter[tuple[str, str]] = Counter()
        for _ in range(count):
            user = f"user-{self.sent}"
            reply = httpx.post(f"{self.url}/v1/completions", headers=GATEWAY_HEADERS, json={
                "model": "rewardstream", "prompt": "def add(a, b):", "max_tokens": 1,
                "user": user}, timeout=60).json()
            task = self.sent % 10
            reward = task / 5 + self.rng.gauss(0, 0.3)
            if reply["arm"] == "canary":
                reward += canary_effect
            served[(reply["arm"], reply["checkpoint_id"])] += 1
            self.record(reply["checkpoint_id"], reply["arm"], reward, task)
        self.flush()
        return served


def _history(store: KafkaRegistryStore, checkpoint_id: str) -> list[CheckpointEvent]:
    return [e for e in store.read().history if e.checkpoint_id == checkpoint_id]


def _decided(store: KafkaRegistryStore, checkpoint_id: str) -> CheckpointEvent | None:
    latest = store.read().latest.get(checkpoint_id)
    return latest if latest is not None and latest.status != "canary" else None


@pytest.fixture
def gateway(kafka: Settings, tiny_model_dir: Path) -> Iterator[str]:
    config = GatewayConfig(follow=kafka, base_path=str(tiny_model_dir.resolve()),
                           catch_up_timeout_s=30.0)
    with serve_in_thread(build_engine_app(tiny_model_dir)) as engine:
        app = create_gateway_app(config, BackendClient(engine.url), MemoryEventSink(),
                                 gateway_auth())
        with serve_in_thread(app) as served:
            yield served.url


def _controller(settings: Settings, log: Path) -> subprocess.Popen[str]:
    return cli(settings, "release", "run", "--share", "0.5", "--margin", "0.15",
                "--min-per-arm", "20", "--max-trajectories", "2000", "--lookback-hours", "1",
                "--look-interval-s", "0.2", stdout=subprocess.DEVNULL,
                stderr=log.open("a"))


def _canary_served(traffic: Traffic, checkpoint_id: str) -> bool:
    return traffic.users(4, 0.0)[("canary", checkpoint_id)] > 0


def test_trained_and_registered_checkpoints_go_through_the_controller_which_resumes_after_kill(
    kafka: Settings, tiny_model_dir: Path, gateway: str, tmp_path: Path,
) -> None:
    store = KafkaRegistryStore(kafka)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    records = tmp_path / "records.jsonl"
    records.write_text("".join(r.model_dump_json() + "\n"
                               for r in synthetic_records(tokenizer, 16, seed=3)))
    settings_file = tmp_path / "train.toml"
    settings_file.write_text("gate_margin = 1.0\ngate_resamples = 200\n")
    run_cli(kafka, "train", "--config", str(settings_file), "--model-dir", str(tiny_model_dir),
         "--out-dir", str(tmp_path / "ckpt"), "--records", str(records), "--lora", "--canary",
         "--batch-records", "8", "--steps-per-cycle", "2", "--deterministic", "--lr", "1e-3")
    registry = store.read()
    [trained] = registry.by_status("canary")
    assert trained.evidence["passed"] is True and trained.adapter
    model = trained.model

    traffic = Traffic(kafka, gateway)
    traffic.users(40, 0.0)  # production's history before any canary: the covariate
    log = tmp_path / "controller.log"
    first = _controller(kafka, log)
    try:
        wait_for(lambda: _canary_served(traffic, trained.checkpoint_id), DEADLINE_S,
                 "canary traffic", POLL_S)
        wait_for(lambda: any(e.kind == "canary_look"
                             for e in _history(store, trained.checkpoint_id)), DEADLINE_S,
                 "interim look", POLL_S)
        looked = [e for e in _history(store, trained.checkpoint_id) if e.kind == "canary_look"]
        seen_before_kill = looked[-1].evidence["ab"]["n_candidate"]
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    traffic.users(20, 1.0)  # while no controller runs
    second = _controller(kafka, log)
    try:
        decided = wait_for(
            lambda: traffic.users(10, 1.0) and _decided(store, trained.checkpoint_id),
            DEADLINE_S, "decision on the trained candidate", POLL_S)
        assert isinstance(decided, CheckpointEvent)
        assert (decided.kind, decided.status, decided.actor) == ("promoted", "production",
                                                                  "release")
        ab = decided.evidence["ab"]
        assert ab["decision"] == "promote" and ab["primary_bound"]["low"] > -0.15
        assert ab["n_candidate"] > seen_before_kill and ab["reward_variance_reduction"] > 0
        kinds = [e.kind for e in _history(store, trained.checkpoint_id)]
        assert kinds[:3] == ["created", "evaluated", "canary_started"]
        assert kinds.count("canary_started") == 1 and kinds[-1] == "promoted"
        # The rule on the same records, folded afresh from the log, decides alike.
        fold = read_fold(kafka, horizon_s=3600)
        running = [e for e in fold.registry.history if e.kind == "canary_started"
                   and e.checkpoint_id == trained.checkpoint_id][0]
        assert canary_evidence(fold, running, decided.occurred_at)[1]["decision"] == "promote"

        adapter = build_random_adapter(tiny_model_dir, tmp_path / "trl-out", seed=9)
        manifest = export_manifest(tmp_path / "export")
        output = run_cli(kafka, "registry", "register", str(adapter), "--model", model,
                      "--checkpoint-id", "trl-run-1", "--manifest", str(manifest),
                      "--gate-margin", "1.0")
        assert "gate: canary" in output, output
        wait_for(lambda: _canary_served(traffic, "trl-run-1"), DEADLINE_S,
                 "the registered adapter's canary", POLL_S)
        rejected = wait_for(lambda: traffic.users(10, -1.0) and _decided(store, "trl-run-1"),
                            DEADLINE_S, "decision on the registered adapter", POLL_S)
        assert isinstance(rejected, CheckpointEvent)
        assert (rejected.kind, rejected.status) == ("rejected", "rejected")
        assert rejected.evidence["ab"]["decision"] == "reject"
        assert rejected.canary is not None and rejected.canary.baseline == trained.checkpoint_id
        assert rejected.data_manifest is not None and rejected.data_manifest.bytes > 0
        assert [e.kind for e in _history(store, "trl-run-1")][:3] == [
            "created", "evaluated", "canary_started"]
        assert store.read().production(model).checkpoint_id == trained.checkpoint_id
        wait_for(lambda: not traffic.users(4, 0.0).get(("canary", "trl-run-1")), DEADLINE_S,
                 "canary ended", POLL_S)
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(timeout=30) == 0, log.read_text()

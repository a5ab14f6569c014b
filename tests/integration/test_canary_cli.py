"""`rewardstream canary start | status | conclude | abort` as a user runs them, on the real
broker: candidates registered with `registry register` (peft adapters over the tiny model) and
passed by the gate, one canary started for one org, shown, fed reward records for both arms
(as the reward worker writes them), concluded by the rule; another started and aborted, a third
concluded before any evidence, and a full model (which warns); and the errors a user meets,
each one line.

No controller runs here: every decision is the command's own (test_release_controller.py runs
the controller and the gateway)."""

from __future__ import annotations

import json
import random
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from infra.models import build_random_adapter
from infra.settings import Settings
from schemas.checkpoints import CheckpointEvent, enter_canary
from tests.support.gateway_checkpoints import promote
from tests.support.release import RewardWriter, cli, export_manifest, run_cli
from trainer.registry_io import KafkaRegistryStore

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]
ORG = "org-test"


def _fails(settings: Settings, *args: str) -> str:
    """The command's one error line, asserting it exited 1 without a traceback."""
    process = cli(settings, *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 1, (out, err)
    assert "Traceback" not in err and out == "", (out, err)
    [line] = err.strip().splitlines()
    assert line.startswith("error: "), err
    return line


def _history(store: KafkaRegistryStore, checkpoint_id: str) -> list[CheckpointEvent]:
    return [e for e in store.read().history if e.checkpoint_id == checkpoint_id]


def _register_and_pass_gate(settings: Settings, store: KafkaRegistryStore, base: Path,
                            work: Path, checkpoint_id: str, seed: int) -> None:
    adapter = build_random_adapter(base, work / checkpoint_id, seed=seed)
    manifest = export_manifest(work / "export")
    output = run_cli(settings, "registry", "register", str(adapter), "--model", "tiny",
                     "--checkpoint-id", checkpoint_id, "--manifest", str(manifest),
                     "--no-gate")
    assert f"{checkpoint_id} registered as a candidate: peft adapter" in output, output
    # The gate's pass as `run_gate` records it (test_trainer_gate.py runs the real one).
    store.publish([enter_canary(store.read(), checkpoint_id, datetime.now(UTC), "gate",
                                {"passed": True, "reason": "gate passed (test)"})])


def test_canary_commands_start_show_conclude_and_abort(
    kafka: Settings, tiny_model_dir: Path, tmp_path: Path,
) -> None:
    store = KafkaRegistryStore(kafka)
    promote(kafka, 1, "prod-1", build_random_adapter(tiny_model_dir, tmp_path / "prod", seed=1))
    for seed, checkpoint_id in enumerate(("cand-a", "cand-b", "cand-c"), start=2):
        _register_and_pass_gate(kafka, store, tiny_model_dir, tmp_path, checkpoint_id, seed)

    # What a user meets before any canary runs.
    assert _fails(kafka, "canary", "status") == "error: no canary is running"
    assert "'ghost' is not in the registry" in _fails(kafka, "canary", "start", "ghost")
    assert "'cand-b' has no running canary (it is canary)" in _fails(
        kafka, "canary", "abort", "cand-b", "--reason", "oops")

    started = run_cli(kafka, "canary", "start", "cand-a", "--share", "0.5", "--org", ORG,
                      "--min-per-arm", "20", "--lookback-hours", "0", "--actor", "alice")
    assert started.strip() == f"canary_started cand-a (50% of org {ORG} against prod-1)"
    event = store.read().get("cand-a")
    assert (event.kind, event.status, event.actor) == ("canary_started", "canary", "alice")
    assert event.canary is not None
    assert (event.canary.share, event.canary.org, event.canary.baseline) == (0.5, ORG, "prod-1")
    assert event.canary.rule["min_per_arm"] == 20 and event.canary.rule["margin"] == 0.15
    assert "already the canary of model 'tiny'" in _fails(kafka, "canary", "start", "cand-b")

    waiting = run_cli(kafka, "canary", "status")
    assert waiting.startswith(f"canary_started cand-a (50% of org {ORG} against prod-1)")
    assert "decision: continue (no trajectories from the production and canary arm yet)" \
        in waiting, waiting

    rewards, rng = RewardWriter(kafka), random.Random(7)
    for i in range(60):
        task = i % 10
        rewards.record("prod-1", "production", task / 5 + rng.gauss(0, 0.3), task)
        rewards.record("cand-a", "canary", task / 5 + 1.0 + rng.gauss(0, 0.3), task)
        rewards.record("cand-a", "canary", -5.0, task, org="org-other")  # out of its scope
    rewards.flush()

    shown = run_cli(kafka, "canary", "status", "cand-a")
    assert "trajectories: production 60, canary 60" in shown, shown
    assert "decision: promote" in shown and "promote above -0.15, reject below 0" in shown
    assert "A/B report: canary cand-a (n=60) vs production prod-1 (n=60), split 50%/50%" \
        in shown, shown
    assert "sample ratio ok" in shown and "rule: " in shown
    look = json.loads(run_cli(kafka, "canary", "status", "--json"))
    assert (look["decision"], look["n_baseline"], look["n_candidate"]) == ("promote", 60, 60)
    assert look["primary_bound"]["low"] > -0.15
    assert [e.kind for e in _history(store, "cand-a")][-1] == "canary_started"  # status: no event

    concluded = run_cli(kafka, "canary", "conclude", "cand-a", "--actor", "alice")
    assert concluded.startswith(f"promoted cand-a (50% of org {ORG} against prod-1): promote: "
                                "reward +"), concluded
    assert "after 120 trajectories" in concluded
    decided = store.read().get("cand-a")
    assert (decided.kind, decided.status, decided.actor) == ("promoted", "production", "alice")
    assert decided.evidence["passed"] is True  # the gate's evidence stays beside the A/B's
    assert decided.evidence["ab"]["decision"] == "promote"
    assert decided.evidence["ab"]["n_candidate"] == 60
    assert [e.kind for e in _history(store, "cand-a")] == [
        "created", "evaluated", "canary_started", "promoted"]
    assert store.read().production("tiny").checkpoint_id == "cand-a"
    assert _fails(kafka, "canary", "status") == "error: no canary is running"

    # Another canary, against the new production, aborted by hand.
    started = run_cli(kafka, "canary", "start", "cand-b", "--share", "0.2")
    assert started.strip() == "canary_started cand-b (20% of the fleet against cand-a)"
    assert run_cli(kafka, "canary", "status").startswith("canary_started cand-b")
    aborted = run_cli(kafka, "canary", "abort", "cand-b", "--reason", "users report broken edits",
                      "--actor", "bob")
    assert aborted.startswith("aborted cand-b (20% of the fleet against cand-a): abort: ")
    assert aborted.strip().endswith("— users report broken edits"), aborted
    ended = store.read().get("cand-b")
    assert (ended.kind, ended.status, ended.actor) == ("aborted", "rejected", "bob")
    assert ended.evidence["ab"]["reason"] == "users report broken edits"
    assert "'cand-b' has no running canary (it is rejected)" in _fails(
        kafka, "canary", "abort", "cand-b", "--reason", "again")
    assert "'cand-b' is rejected" in _fails(kafka, "canary", "start", "cand-b")

    # Concluded before the rule says promote: rejected, saying so.
    run_cli(kafka, "canary", "start", "cand-c")
    concluded = run_cli(kafka, "canary", "conclude", "cand-c")
    assert concluded.startswith("rejected cand-c"), concluded
    rejected = store.read().get("cand-c")
    assert (rejected.kind, rejected.status) == ("rejected", "rejected")
    assert rejected.evidence["ab"]["reason"].startswith(
        "concluded by hand before the rule promoted: no trajectories")
    assert store.read().production("tiny").checkpoint_id == "cand-a"

    # A full model (the tiny model's own directory): it starts, warning that only a gateway
    # whose --base-path is that directory gives it users.
    output = run_cli(kafka, "registry", "register", str(tiny_model_dir), "--model", "tiny",
                     "--checkpoint-id", "full-1", "--offsets", "rewards:0=0-10", "--no-gate")
    assert "full-1 registered as a candidate: full model" in output, output
    store.publish([enter_canary(store.read(), "full-1", datetime.now(UTC), "gate",
                                {"passed": True})])
    started = run_cli(kafka, "canary", "start", "full-1")
    assert started.startswith("canary_started full-1"), started
    assert ("warning: full-1 is a full model, not a peft adapter: a gateway serves it only "
            f"when its --base-path is {tiny_model_dir.resolve()}") in started, started
    run_cli(kafka, "canary", "abort", "full-1", "--reason", "no gateway serves it")
    assert store.read().get("full-1").kind == "aborted"

"""A third-party trainer on an export: TRL's KTOTrainer trains SmolLM2-135M-Instruct (imported
from GGUF) with LoRA on the CPU from `rewardstream export --view binary`, read by
`datasets.load_dataset`; its loss falls over its steps; the adapter it saved is registered with
`rewardstream registry register --manifest` and gated, and `checkpoints` holds the gate's
decision with the export's manifest as its lineage.

KTO because the binary view is unpaired: each completion desirable or not on its own, with no
second completion of the same prompt to pair it with (docs/trainer-and-release.md). The run is
sized to show the pipe works, not to improve the model: four rows (two desirable, two not) as
one batch, trained on again at every step, so a working update must lower the loss.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import torch

from infra.kafka_auth import client_env
from infra.settings import Settings
from schemas.checkpoints import CheckpointEvent
from schemas.ids import uuid7
from streams.simlog import SimConfig, simulate_log
from tests.support.exports import cli_export
from tests.support.models import PreparedModel
from tests.support.streams_log import produce
from trainer.registry_io import KafkaRegistryStore

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(900)]

ORG = "org-2"
MODEL = "smollm2"
CHECKPOINT = "trl-kto-1"
STEPS = 6
LOG = simulate_log(120, seed=17, config=SimConfig(texts=True, mean_start_gap_s=60.0))


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """On a busy 2-core machine one intra-op thread is several times faster than two."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _kto(model_dir: Path, export_dir: Path, out_dir: Path, cache: Path) -> list[float]:
    """The recipe of docs/trainer-and-release.md (training elsewhere), sized for a test: the
    training loss at each step."""
    import datasets
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import KTOConfig, KTOTrainer

    rows = datasets.load_dataset(str(export_dir), split="train", cache_dir=str(cache))
    desirable = rows.filter(lambda row: row["label"])
    undesirable = rows.filter(lambda row: not row["label"])
    assert desirable.num_rows >= 2 and undesirable.num_rows >= 2, rows["label"]
    train = datasets.interleave_datasets([desirable.select(range(2)),
                                          undesirable.select(range(2))])
    assert train["label"] == [True, False, True, False]
    args = KTOConfig(output_dir=str(out_dir), max_steps=STEPS, per_device_train_batch_size=4,
                     learning_rate=1e-3, lr_scheduler_type="constant", max_length=64,
                     logging_steps=1, save_strategy="no", report_to="none", bf16=False,
                     use_cpu=True, gradient_checkpointing=False, seed=0)
    trainer = KTOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32), args=args,
        train_dataset=train, processing_class=AutoTokenizer.from_pretrained(model_dir),
        peft_config=LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"],
                               task_type="CAUSAL_LM"))
    trainer.train()
    trainer.save_model(str(out_dir))
    return [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]


def _base_production(store: KafkaRegistryStore, model_dir: Path) -> None:
    """The imported base model as the first production checkpoint, as `rewardstream train`
    registers it: what the gate compares the candidate with."""
    registry = store.read()
    store.publish([CheckpointEvent(
        event_id=str(uuid7()), sequence=registry.next_sequence, occurred_at=datetime.now(UTC),
        kind="promoted", status="production", checkpoint_id="base", model=MODEL,
        path=str(model_dir), evidence={"reason": "base model registered as production"})])


def test_trl_kto_trains_from_an_export_and_its_adapter_is_registered_and_gated(
        kafka: Settings, smollm2: PreparedModel, tmp_path: Path, one_torch_thread: None,
        report_figures: Callable[[str], None]) -> None:
    started = time.monotonic()
    base_dir = smollm2.path.resolve()
    produce(kafka, LOG)
    export_dir = tmp_path / "export"
    manifest = cli_export(kafka, ORG, export_dir, "--view", "binary", "--format", "parquet",
                          "--to", f"0:{len(LOG)}")
    assert manifest["view"] == "binary" and manifest["source"]["partitions"]["0"]["to"] == len(LOG)
    assert manifest["counts"]["rows"] >= 4

    trained = time.monotonic()
    adapter_dir = tmp_path / "trl-out"
    losses = _kto(base_dir, export_dir, adapter_dir, tmp_path / "hf-cache")
    train_s = time.monotonic() - trained
    assert len(losses) == STEPS, losses
    # LoRA starts at zero, so the first step's policy is the reference: rewards and KL are 0
    # and the loss is 1 - sigmoid(0).
    assert losses[0] == pytest.approx(0.5, abs=1e-3), losses
    assert sum(losses[-2:]) / 2 < losses[0] - 0.05 and losses[-1] < losses[0], losses
    adapter_config = json.loads((adapter_dir / "adapter_config.json").read_text())
    assert Path(adapter_config["base_model_name_or_path"]).resolve() == base_dir

    store = KafkaRegistryStore(kafka)
    _base_production(store, base_dir)
    gated = time.monotonic()
    manifest_path = export_dir / "manifest.json"
    done = subprocess.run(
        [sys.executable, "-m", "rewardstream", "registry", "register", str(adapter_dir),
         "--model", MODEL, "--checkpoint-id", CHECKPOINT, "--manifest", str(manifest_path),
         "--org", ORG, "--actor", "trl-test"],
        env={**os.environ, **client_env(kafka), "OMP_NUM_THREADS": "1"},
        capture_output=True, text=True, timeout=600)
    gate_s = time.monotonic() - gated
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{CHECKPOINT} registered as a candidate: peft adapter" in done.stdout, done.stdout

    history = [e for e in store.read().history if e.checkpoint_id == CHECKPOINT]
    assert [e.kind for e in history] == ["created", "evaluated"], [e.kind for e in history]
    created, decided = history
    assert created.actor == "register:trl-test" and created.adapter
    assert created.path == str(adapter_dir.resolve()) and created.base_path == str(base_dir)
    # The gate passed it (default margin, the builtin suite), so it waits for the canary.
    assert "gate: canary" in done.stdout, done.stdout
    assert (decided.status, decided.actor) == ("canary", "gate")
    assert decided.evidence["passed"] is True and decided.evidence["incumbent"] == "base"
    for event in history:  # the export's manifest is the lineage, on every event
        assert event.data_manifest is not None and event.orgs == [ORG]
        assert event.data_manifest.path == str(manifest_path.resolve())
        assert event.data_manifest.sha256 == hashlib.sha256(
            manifest_path.read_bytes()).hexdigest()

    report_figures(
        f"[trl kto] loss over {STEPS} steps: {[round(x, 4) for x in losses]}; training "
        f"{train_s:.1f} s, register + gate {gate_s:.1f} s, whole test "
        f"{time.monotonic() - started:.1f} s (model prepared in {smollm2.prepare_s:.1f} s); "
        f"gate overall {json.dumps(decided.evidence.get('overall'))}")

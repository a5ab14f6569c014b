"""Gate and registry against the real broker: a good candidate is promoted, a planted bad one is
rejected with its evidence, rollback restores the previous production, and `registry list`
shows all of it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from transformers import AutoTokenizer
from typer.testing import CliRunner

from infra.settings import Settings
from rewardstream.cli import app
from schemas.rewards import reward_record_key
from trainer.config import load_config
from trainer.cycle import TrainingCycle
from trainer.registry_io import KafkaRegistryStore
from trainer.source import ConsumedRecord
from trainer.synthetic import synthetic_records

pytestmark = pytest.mark.kafka


def _consumed(tokenizer, count: int, first: int, checkpoint_id: str) -> list[ConsumedRecord]:
    records = synthetic_records(tokenizer, count, checkpoint_id, seed=first, first_index=first)
    return [ConsumedRecord(reward_record_key(r.org_id, r.trajectory_id, r.spec_version).decode(),
                           r)
            for r in records]


def test_gate_promotes_rejects_and_rollback_restores(kafka: Settings, tiny_model_dir: Path,
                                                     tmp_path: Path) -> None:
    store = KafkaRegistryStore(kafka)
    config = load_config(None, model_dir=tiny_model_dir, out_dir=tmp_path / "ckpt", lr=1e-4,
                         batch_records=8, gate_margin=1e-4, gate_resamples=500)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)

    good = TrainingCycle(config, store).run(_consumed(tokenizer, 8, 0, "base"))
    assert good is not None and good.decision == "promoted", good.evidence
    # A planted bad candidate: the same cycle with a destructive learning rate.
    wrecker = TrainingCycle(replace(config, lr=0.5), store)
    bad = wrecker.run(_consumed(tokenizer, 8, 8, good.checkpoint_id))
    assert bad is not None and bad.decision == "rejected"
    assert bad.evidence["passed"] is False and bad.evidence["incumbent"] == good.checkpoint_id
    assert bad.evidence["overall"]["upper"] < -1e-4
    assert any(not family["passed"] for family in bad.evidence["families"])

    registry = store.read()
    assert registry.production().checkpoint_id == good.checkpoint_id
    assert registry.get(bad.checkpoint_id).parent_id == good.checkpoint_id
    assert registry.get(bad.checkpoint_id).offsets == {}  # in-process records carry no offsets

    env = {"REWARDSTREAM_TOPIC_PREFIX": kafka.topic_prefix,
           "REWARDSTREAM_KAFKA_PORT": str(kafka.kafka_port)}
    runner = CliRunner()
    rolled = runner.invoke(app, ["registry", "rollback", "--reason", "kept edits fell",
                                 "--actor", "oncall"], env=env)
    assert rolled.exit_code == 0, rolled.output
    assert store.read().production().checkpoint_id == "base"

    listing = runner.invoke(app, ["registry", "list"], env=env).output
    lines = {line.split()[1]: line for line in listing.splitlines()[1:]}
    assert "rolled_back" in lines[good.checkpoint_id] and "oncall" in lines[good.checkpoint_id]
    assert "rejected" in lines[bad.checkpoint_id] and "gate fail" in lines[bad.checkpoint_id]
    assert "production" in lines["base"] and "rollback_of" in lines["base"]
    history = runner.invoke(app, ["registry", "list", "--history"], env=env).output
    kinds = [line.split()[3] for line in history.splitlines()[1:]
             if line.split()[1] == good.checkpoint_id]
    assert kinds == ["created", "promoted", "rolled_back"] and "gate pass" in history
    shown = runner.invoke(app, ["registry", "show", bad.checkpoint_id], env=env).output
    assert '"status": "rejected"' in shown and '"margin": 0.0001' in shown

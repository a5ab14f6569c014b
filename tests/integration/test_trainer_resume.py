"""A trainer killed with SIGKILL mid-cycle and resumed ends with the same weights as an
uninterrupted run, and every reward record is trained exactly once (real broker)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from safetensors.torch import load_file
from transformers import AutoTokenizer

from infra.settings import Settings
from infra.topics import create_topics
from schemas.rewards import reward_record_key
from schemas.topics import topic_name
from trainer.checkpoint_io import CheckpointMeta, latest_checkpoint, read_meta
from trainer.synthetic import synthetic_records

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

RECORDS, BATCH, STEPS = 15, 4, 2  # + one duplicate: two cycles of two updates of four records


def _produce(settings: Settings, values: list[tuple[bytes, bytes]]) -> None:
    producer = KafkaProducer(bootstrap_servers=settings.bootstrap_servers, acks="all")
    for key, value in values:
        producer.send(topic_name(settings.topic_prefix, "rewards"), key=key, value=value)
    producer.flush()
    producer.close()


def _train(settings: Settings, model_dir: Path, out_dir: Path, cycles: int) -> subprocess.Popen:
    env = {**os.environ, "REWARDSTREAM_TOPIC_PREFIX": settings.topic_prefix,
           "REWARDSTREAM_KAFKA_PORT": str(settings.kafka_port)}
    command = [sys.executable, "-m", "infra.cli", "train", "--model-dir", str(model_dir),
               "--out-dir", str(out_dir), "--cycle", "--max-cycles", str(cycles),
               "--deterministic", "--steps-per-cycle", str(STEPS), "--batch-records", str(BATCH),
               "--lr", "1e-3"]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)


def _lines_until(process: subprocess.Popen, wanted: dict[str, object]) -> None:
    for line in process.stdout:
        if line.startswith("{") and wanted.items() <= json.loads(line).items():
            return
    raise AssertionError(f"the trainer exited ({process.wait()}) before printing {wanted}")


def _checkpoint_metas(out_dir: Path) -> list[CheckpointMeta]:
    return sorted((read_meta(d) for d in out_dir.iterdir() if (d / "checkpoint.json").exists()),
                  key=lambda m: m.trainer_state.global_step)


def test_sigkill_mid_cycle_then_resume_matches_an_uninterrupted_run(
    kafka: Settings, tiny_model_dir: Path, tmp_path: Path
) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    values = [(reward_record_key(r.org_id, r.trajectory_id, r.spec_version),
               r.model_dump_json().encode())
              for r in synthetic_records(tokenizer, RECORDS, seed=5)]
    values.insert(6, values[2])  # a redelivered duplicate: consumed, never trained
    reference = replace(kafka, topic_prefix=kafka.topic_prefix + "ref.")
    create_topics(reference)

    _produce(reference, values)
    uninterrupted = _train(reference, tiny_model_dir, tmp_path / "ref", cycles=2)
    assert uninterrupted.wait(timeout=300) == 0

    _produce(kafka, values[:12])  # cycle 1 and the first update of cycle 2, then it waits
    killed = _train(kafka, tiny_model_dir, tmp_path / "run", cycles=2)
    _lines_until(killed, {"event": "step", "step": 3})
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=30)
    _produce(kafka, values[12:])
    resumed = _train(kafka, tiny_model_dir, tmp_path / "run", cycles=1)
    assert resumed.wait(timeout=300) == 0

    ref_dir, run_dir = latest_checkpoint(tmp_path / "ref"), latest_checkpoint(tmp_path / "run")
    for name in ("model.safetensors", "trainer_state.safetensors"):
        ref, run = load_file(ref_dir / name), load_file(run_dir / name)
        assert ref.keys() == run.keys()
        assert all(ref[k].equal(run[k]) for k in ref), name

    metas = _checkpoint_metas(tmp_path / "run")
    rewards = f"{topic_name(kafka.topic_prefix, 'rewards')}:0"
    assert [m.offsets[rewards] for m in metas] == [[0, 7], [8, 15]]
    trained = [m.stats["counts"].get("records_trained", 0) for m in metas]
    assert sum(trained) == RECORDS
    assert sum(m.stats["counts"].get("records_duplicate", 0) for m in metas) == 1
    assert [m.stats["counts"] for m in metas] == [m.stats["counts"]
                                                  for m in _checkpoint_metas(tmp_path / "ref")]
    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap_servers,
                             group_id="rewardstream-trainer", enable_auto_commit=False)
    assert consumer.committed(TopicPartition(rewards.rsplit(":", 1)[0], 0)) == RECORDS + 1
    consumer.close()

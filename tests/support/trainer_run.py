"""A trainer SIGKILLed mid-cycle and resumed, beside an uninterrupted run on the same records.

Fifteen reward records and one redelivered duplicate make two cycles of two updates of four
records. The uninterrupted run trains them all under one topic prefix; under another, a
trainer is killed after its third update (cycle 1 done, cycle 2 half done, its last records
not yet produced) and a new one resumes. ``while_down`` runs between the kill and the resume:
a fault of the surroundings while no trainer runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from safetensors.torch import load_file
from transformers import AutoTokenizer

from infra.kafka_auth import client_env
from infra.settings import Settings
from infra.topics import create_topics
from schemas.rewards import reward_record_key
from schemas.topics import topic_name
from trainer.checkpoint_io import CheckpointMeta, latest_checkpoint, read_meta
from trainer.synthetic import synthetic_records

__all__ = ["RECORDS", "Resume", "assert_resumed_like_uninterrupted", "kill_and_resume"]

RECORDS, BATCH, STEPS = 15, 4, 2  # + one duplicate: two cycles of two updates of four records


@dataclass(frozen=True)
class Resume:
    settings: Settings
    reference_dir: Path  # the uninterrupted run's checkpoints
    run_dir: Path  # the killed and resumed run's
    recovery_s: float  # from the resumed trainer's start until it exited


def kill_and_resume(settings: Settings, model_dir: Path, work: Path,
                    while_down: Callable[[], None] = lambda: None) -> Resume:
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    values = [(reward_record_key(r.org_id, r.trajectory_id, r.spec_version),
               r.model_dump_json().encode())
              for r in synthetic_records(tokenizer, RECORDS, seed=5)]
    values.insert(6, values[2])  # a redelivered duplicate: consumed, never trained
    reference = replace(settings, topic_prefix=settings.topic_prefix + "ref.")
    create_topics(reference)

    _produce(reference, values)
    uninterrupted = _train(reference, model_dir, work / "ref", cycles=2)
    assert uninterrupted.wait(timeout=300) == 0

    _produce(settings, values[:12])  # cycle 1 and the first update of cycle 2, then it waits
    killed = _train(settings, model_dir, work / "run", cycles=2)
    _lines_until(killed, {"event": "step", "step": 3})
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=30)
    while_down()
    _produce(settings, values[12:])
    began = time.monotonic()
    resumed = _train(settings, model_dir, work / "run", cycles=1)
    assert resumed.wait(timeout=300) == 0
    return Resume(settings, work / "ref", work / "run", time.monotonic() - began)


def assert_resumed_like_uninterrupted(resume: Resume) -> None:
    """The same weights and optimizer state as the uninterrupted run; every record trained
    once, the duplicate never; the trainer's offsets committed past every record."""
    ref_dir, run_dir = latest_checkpoint(resume.reference_dir), latest_checkpoint(resume.run_dir)
    for name in ("model.safetensors", "trainer_state.safetensors"):
        ref, run = load_file(ref_dir / name), load_file(run_dir / name)
        assert ref.keys() == run.keys()
        assert all(ref[k].equal(run[k]) for k in ref), name

    metas = checkpoint_metas(resume.run_dir)
    rewards = topic_name(resume.settings.topic_prefix, "rewards")
    assert [m.offsets[f"{rewards}:0"] for m in metas] == [[0, 7], [8, 15]]
    assert sum(trained_counts(metas)) == RECORDS
    assert sum(m.stats["counts"].get("records_duplicate", 0) for m in metas) == 1
    assert [m.stats["counts"] for m in metas] == [m.stats["counts"]
                                                  for m in checkpoint_metas(resume.reference_dir)]
    consumer = KafkaConsumer(bootstrap_servers=resume.settings.bootstrap_servers,
                             group_id="rewardstream-trainer", enable_auto_commit=False)
    try:
        assert consumer.committed(TopicPartition(rewards, 0)) == RECORDS + 1
    finally:
        consumer.close()


def checkpoint_metas(out_dir: Path) -> list[CheckpointMeta]:
    return sorted((read_meta(d) for d in out_dir.iterdir() if (d / "checkpoint.json").exists()),
                  key=lambda m: m.trainer_state.global_step)


def trained_counts(metas: list[CheckpointMeta]) -> list[int]:
    return [m.stats["counts"].get("records_trained", 0) for m in metas]


def _produce(settings: Settings, values: list[tuple[bytes, bytes]]) -> None:
    producer = KafkaProducer(bootstrap_servers=settings.bootstrap_servers, acks="all")
    for key, value in values:
        producer.send(topic_name(settings.topic_prefix, "rewards"), key=key, value=value)
    producer.flush()
    producer.close()


def _train(settings: Settings, model_dir: Path, out_dir: Path,
           cycles: int) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "rewardstream", "train", "--model-dir", str(model_dir),
               "--out-dir", str(out_dir), "--cycle", "--max-cycles", str(cycles),
               "--deterministic", "--steps-per-cycle", str(STEPS), "--batch-records", str(BATCH),
               "--lr", "1e-3", "--metrics-port", "0"]
    return subprocess.Popen(command, env={**os.environ, **client_env(settings)},
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def _lines_until(process: subprocess.Popen[str], wanted: dict[str, object]) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith("{") and wanted.items() <= json.loads(line).items():
            return
    raise AssertionError(f"the trainer exited ({process.wait()}) before printing {wanted}")

"""The release loop's test helpers: the `rewardstream` command run as a user runs it, against
a test's broker, and reward records for a canary's arms written as the reward worker writes
them."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from kafka import KafkaProducer

from infra.kafka_auth import client_env
from infra.settings import Settings
from schemas.rewards import RewardRecord, Sample, reward_record_key
from schemas.topics import topic_name

__all__ = ["RewardWriter", "cli", "export_manifest", "run_cli"]


def cli(settings: Settings, *args: str, **kwargs: object) -> subprocess.Popen[str]:
    """`rewardstream ARGS...` as a child process on ``settings``' brokers and topic prefix."""
    return subprocess.Popen([sys.executable, "-m", "rewardstream", *args], text=True,
                            env={**os.environ, **client_env(settings)}, **kwargs)  # type: ignore[call-overload]


def export_manifest(out_dir: Path) -> Path:
    """The manifest.json of an (empty) export written as `rewardstream export` writes one: what
    `registry register --manifest` takes as lineage."""
    from streams.export import MANIFEST_FILE, ExportRange, write_export
    from streams.spec import load_spec

    write_export(out_dir, [], view="samples", file_format="jsonl", org_id="org-test",
                 spec=load_spec(), topic="events.raw", span=ExportRange({0: 0}, {0: 120}),
                 counts={"rows": 0})
    return out_dir / MANIFEST_FILE


def run_cli(settings: Settings, *args: str) -> str:
    """`rewardstream ARGS...` run to its end; what it printed (stdout and stderr), asserting
    it succeeded."""
    process = cli(settings, *args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output, _ = process.communicate(timeout=600)
    assert process.returncode == 0, output
    return output


class RewardWriter:
    """Reward records on `rewards`, one a trajectory, for the checkpoint and arm that served it."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.producer = KafkaProducer(bootstrap_servers=settings.bootstrap_servers, acks="all")
        self.sent = 0

    def record(self, checkpoint: str, arm: str, reward: float, task: int,
               org: str = "org-test") -> None:
        """One trajectory of task ``task`` (its opening prompt), ended now, with ``reward``."""
        self.sent += 1
        now = datetime.now(UTC)
        sample = Sample(completion_id=f"c{self.sent}", checkpoint_id=checkpoint,
                        prompt_token_ids=[1, 7, task], completion_token_ids=[3],
                        behaviour_logprobs=[-0.5])
        record = RewardRecord(
            trajectory_id=f"t{self.sent}", spec_version="v", checkpoint_id=checkpoint, arm=arm,
            org_id=org, outcome="completed", ended_at=now, finalized_by="complete",
            finalized_at=now, samples=[sample], components={"x": reward}, total=reward,
            signals={"edits_accepted": 1.0, "kept_fraction": 1.0}, event_ids=[])
        self.producer.send(topic_name(self.settings.topic_prefix, "rewards"),
                           key=reward_record_key(record.org_id, record.trajectory_id, "v"),
                           value=record.model_dump_json().encode())

    def flush(self) -> None:
        self.producer.flush()

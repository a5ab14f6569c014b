"""Reward-join workers as processes of one consumer group, as on separate machines."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from kafka.errors import KafkaError

from infra.kafka_auth import client_env
from infra.settings import Settings
from infra.topics import admin_client
from streams.spec import load_spec
from streams.worker import default_app_id
from tests.support.waits import wait_for

__all__ = ["group_members", "start_worker", "stop_workers", "wait_for_members"]


def start_worker(settings: Settings, datadir: Path, log: Path,
                 *options: str) -> subprocess.Popen[bytes]:
    """`rewardstream worker` with its own state directory, checkpointing often, logging to
    ``log``; ``options`` are more command-line options."""
    env = {**os.environ, **client_env(settings),
           "REWARDSTREAM_TOPIC_PARTITIONS": str(settings.topic_partitions)}
    command = [str(Path(sys.executable).with_name("rewardstream")), "worker", "--datadir",
               str(datadir), "--batch-max", "200", "--commit-interval-s", "0.5",
               "--loglevel", "info", "--shutdown-timeout-s", "10",
               *(() if "--metrics-port" in options else ("--metrics-port", "0")), *options]
    with open(log, "ab") as stderr:
        return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=stderr)


def group_members(settings: Settings) -> tuple[str, int]:
    """The state of the join's consumer group and its member count."""
    group = default_app_id(settings, load_spec())
    admin = admin_client(settings)
    try:
        described = admin.describe_groups([group]).get(group, {})
        return described.get("group_state", ""), len(described.get("members", []))
    except KafkaError as exc:
        if not exc.retriable:  # e.g. no coordinator yet on a fresh cluster
            raise
        return "", 0
    finally:
        admin.close()


def wait_for_members(settings: Settings, count: int, timeout_s: float = 90) -> float:
    """Until the join's consumer group is stable with ``count`` members; the seconds it took."""
    began = time.monotonic()
    wait_for(lambda: group_members(settings) == ("Stable", count), timeout_s,
             f"the group to have {count} stable members", interval_s=0.5)
    return time.monotonic() - began


def stop_workers(workers: Iterable[subprocess.Popen[bytes]], timeout_s: float = 30) -> None:
    """SIGTERM (after SIGCONT, for a stopped one) and wait; SIGKILL what outlives it."""
    workers = list(workers)
    for worker in workers:
        if worker.poll() is None:
            worker.send_signal(signal.SIGCONT)
            worker.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for worker in workers:
        try:
            worker.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()

"""The trainer SIGKILLed mid-update on the three-node cluster, and the node leading its reward
topic killed while no trainer runs: the resumed trainer, against the two nodes left, ends with
the weights of an uninterrupted run, every record trained once and the duplicate never.

The resumed trainer finds its group's committed offsets and its latest checkpoint on a cluster
that has lost the leader of ``rewards`` (and perhaps its group's coordinator): a new leader is
elected, and nothing it trains depends on which node answers.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from infra import broker
from infra.settings import Settings
from tests.support.fault_ledger import FaultRow, LogCheck, report
from tests.support.private_kafka import leader_and_isr, wait_led_without
from tests.support.trainer_run import (
    RECORDS,
    assert_resumed_like_uninterrupted,
    checkpoint_metas,
    kill_and_resume,
    trained_counts,
)

pytestmark = [pytest.mark.faults, pytest.mark.kafka, pytest.mark.slow]


def test_a_trainer_killed_mid_update_resumes_bit_identically_on_two_nodes_of_three(
        cluster: Settings, tiny_model_dir: Path, tmp_path: Path,
        report_figures: Callable[[str], None]) -> None:
    victims: list[int] = []

    def kill_the_rewards_leader() -> None:
        victim, _ = leader_and_isr(cluster, "rewards")
        broker.stop(cluster, node_id=victim, sig=signal.SIGKILL)
        wait_led_without(cluster, "rewards", victim)
        victims.append(victim)

    resume = kill_and_resume(cluster, tiny_model_dir, tmp_path, kill_the_rewards_leader)
    trained = sum(trained_counts(checkpoint_metas(resume.run_dir)))
    report(FaultRow(
        "SIGKILL the trainer after its third update (of four), kill -9 the node leading "
        "`rewards` while it is down, resume it on the two nodes left",
        "pytest tests/faults/test_trainer_kill.py", RECORDS + 1,
        LogCheck(accepted=RECORDS, on_log=trained, lost=max(RECORDS - trained, 0),
                 duplicated=max(trained - RECORDS, 0), unexpected=0),
        resume.recovery_s,
        f"sent: {RECORDS} records and one redelivered copy; accepted: records to train; on the "
        f"log: records trained; node {victims[0]} down; recovery: the resumed trainer's run "
        "(start, model load, last update, checkpoint); weights and optimizer state equal the "
        "uninterrupted run's"), report_figures)
    assert_resumed_like_uninterrupted(resume)

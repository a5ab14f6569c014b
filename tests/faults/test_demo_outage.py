"""The whole three-node cluster killed for 30 s in the middle of a demo cycle, with every service
of the loop running (ingest, gateway, reward worker, both monitors workers, console, trainer),
then started again; nobody restarts anything by hand.

The demo's simulated users go on working through the outage: the SDK keeps their events in its
disk queue and the gateway its completions in its spool. Every event the demo's SDK took
(written down by the demo's process as it took it) is on the log exactly once. The gateway's
completions are checked against the trajectories: each ``trajectory.ended`` says how many turns
it took, each turn one completion the gateway served, so a completion the gateway answered and
never logged shows up as a trajectory with fewer completions than turns; one the spool sent
again is the same bytes. The reward records equal the offline replay of the log; every cycle
gets all its trajectories' records, and the trainer's candidate of cycle 1 covers all of
cycle 1's.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition

from infra import broker
from infra.kafka_io import read_topic
from infra.settings import Settings
from schemas.events import GATEWAY_PRODUCER, CompletionServed, TrajectoryEnded, parse_event
from schemas.rewards import reward_record_key
from schemas.topics import topic_name
from streams.sources import read_records
from streams.spec import load_spec
from tests.support.fault_ledger import FaultRow, LogCheck, check_log, copies_on_log, report
from tests.support.ports import free_port
from tests.support.private_kafka import local_broker_env
from tests.support.streams_log import replay_topic
from tests.support.waits import wait_for
from trainer.checkpoint_io import read_meta

pytestmark = [pytest.mark.faults, pytest.mark.kafka, pytest.mark.slow]

CYCLES, TRAJECTORIES = 2, 30
EVENTS_BEFORE_KILL = 40  # a few trajectories in: the cycle's traffic is under way
DOWN_S = 30.0
_CHILD = Path(__file__).parents[1] / "support" / "demo_child.py"


def _events_on_log(settings: Settings) -> int:
    topic = topic_name(settings.topic_prefix, "events.raw")
    consumer = KafkaConsumer(bootstrap_servers=settings.bootstrap_servers)
    try:
        partitions = consumer.partitions_for_topic(topic) or set()
        ends = consumer.end_offsets([TopicPartition(topic, p) for p in partitions])
        return sum(ends.values())
    finally:
        consumer.close()


@pytest.mark.timeout(900)
def test_the_cluster_killed_mid_cycle_loses_no_completion_and_the_demo_completes(
        cluster: Settings, tmp_path: Path, report_figures: Callable[[str], None]) -> None:
    demo_settings = replace(cluster, topic_prefix=f"{cluster.topic_prefix}demo.")
    run_dir = tmp_path / "run"
    with (tmp_path / "demo.log").open("w") as out:
        demo = subprocess.Popen(
            [sys.executable, str(_CHILD), str(run_dir), *(str(free_port()) for _ in range(3)),
             "--prefix", demo_settings.topic_prefix, "--cycles", str(CYCLES),
             "--trajectories", str(TRAJECTORIES), "--rewards-timeout-s", "240",
             # A canary decided within a few rounds: the outage, not the rule, is under test.
             "--canary-max-trajectories", str(3 * TRAJECTORIES),
             "--emitted-ids", str(tmp_path / "emitted.txt")],
            env=local_broker_env(cluster), stdout=out, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: _events_on_log(demo_settings) >= EVENTS_BEFORE_KILL, 300,
                 "the demo's traffic on the log", 0.5, alive=lambda: demo.poll() is None)
        broker.stop(cluster, sig=signal.SIGKILL)
        time.sleep(DOWN_S)
        restarted_at = time.monotonic()
        broker.start(cluster)
        demo.wait(timeout=600)
        finished_s = time.monotonic() - restarted_at
    finally:
        if demo.poll() is None:  # on SIGTERM the demo stops the services it started first
            demo.terminate()
            try:
                demo.wait(timeout=90)
            except subprocess.TimeoutExpired:
                demo.kill()
                demo.wait()
    output = (tmp_path / "demo.log").read_text()
    assert demo.returncode == 0, output[-4000:]

    events = [parse_event(r.value) for r in read_topic(demo_settings, "events.raw")]
    emitted = (tmp_path / "emitted.txt").read_text().split()
    clients = check_log(emitted, Counter(str(e.event_id) for e in events
                                         if e.producer != GATEWAY_PRODUCER))
    resent = copies_on_log(demo_settings)  # completions the gateway's spool sent again
    # Distinct completions: a copy the gateway's spool sent again is a duplicate, not a turn.
    served = Counter(trajectory for trajectory, _ in {
        (e.trajectory_id, e.payload.completion_id) for e in events
        if isinstance(e, CompletionServed)})
    ended = list({e.event_id: e for e in events if isinstance(e, TrajectoryEnded)}.values())
    # A trajectory that ended in error took a last turn whose call failed: nothing to count.
    counted = [e for e in ended if e.payload.outcome != "error"]
    short = {e.trajectory_id: (e.payload.turns, served[e.trajectory_id]) for e in counted
             if served[e.trajectory_id] != e.payload.turns}
    turns = sum(e.payload.turns for e in counted)
    expected = replay_topic(demo_settings, load_spec())
    records = read_records(demo_settings)
    cycles = json.loads((run_dir / "cycles.json").read_text())
    first = read_meta(run_dir / "checkpoints" / cycles[0]["candidate"])
    report(FaultRow(
        "kill -9 all three brokers for 30 s in the middle of a demo cycle (SDK → ingest, the "
        "gateway, the reward worker, both monitors workers, the console and the trainer "
        "running), start them again",
        "pytest tests/faults/test_demo_outage.py", turns,
        LogCheck(accepted=turns, on_log=sum(served[e.trajectory_id] for e in counted),
                 lost=len(short), duplicated=sum(len(v) - 1 for v in resent.values()),
                 unexpected=0),
        finished_s,
        f"sent/accepted: turns the users took (one completion each); on the log: "
        f"completion.served; lost: trajectories with fewer completions than turns; "
        f"duplicated: records on the log more than once; the SDK took {clients.accepted} "
        f"events: {clients.on_log} on the log, {clients.lost} lost, {clients.duplicated} "
        f"duplicated, {clients.unexpected} never taken; {len(ended)} trajectories "
        f"({len(ended) - len(counted)} ended in error), "
        f"{len(records)} reward records = replay {len(expected.records)}; records per cycle "
        f"{[c['figures']['trajectories'] for c in cycles]}; cycle 1's candidate trained on "
        f"{first.stats['counts'].get('records', 0)} records; services restarted by the demo: "
        f"{output.count('; restarted (restart ')}; recovery: the restart until the demo "
        f"finished (both cycles)"), report_figures)
    assert (clients.lost, clients.duplicated, clients.unexpected) == (0, 0, 0)
    assert not short  # every completion the gateway served is on the log
    assert all(len(set(values)) == 1 for values in resent.values())  # the same bytes again
    assert all(parse_event(values[0]).producer == GATEWAY_PRODUCER for values in resent.values())
    # Each cycle ran its cohort, and a cycle with a canary more rounds until it was decided.
    per_cycle = [c["figures"]["trajectories"] for c in cycles]
    assert len(ended) == sum(per_cycle)
    assert records == {reward_record_key(r.org_id, r.trajectory_id, r.spec_version): r
                       for r in expected.records}
    assert len(per_cycle) == CYCLES and all(n >= TRAJECTORIES for n in per_cycle)
    assert first.stats["counts"]["records"] == TRAJECTORIES  # cycle 1's records, all of them

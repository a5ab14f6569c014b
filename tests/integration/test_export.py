"""`rewardstream export` on the real broker: two exports of one range are the same bytes and
equal the replay; `datasets.load_dataset` reads every view in both formats with the documented
columns; times resolve to the offsets the manifest names."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from infra.settings import Settings
from schemas.samples import sample_rows
from streams.export import parse_bound, run_export
from streams.replay import of_org, replay_rows
from streams.simlog import SimConfig, simulate_log
from streams.sources import kafka_rows
from streams.spec import load_spec
from streams.views import samples_view
from tests.support.exports import cli_export
from tests.support.streams_log import produce

pytestmark = pytest.mark.kafka

SPEC = load_spec()
LOG = simulate_log(120, seed=17, config=SimConfig(texts=True, mean_start_gap_s=60.0))
ORG = "org-2"
RETENTION_MS = 7 * 86_400_000
# The columns docs/trainer-and-release.md documents for each view.
COLUMNS = {
    "binary": ["prompt", "completion", "label", "advantage", "credit", "reward", "org_id",
               "trajectory_id", "completion_id", "checkpoint_id", "spec_version"],
    "preferences": ["prompt", "chosen", "rejected", "chosen_credit", "rejected_credit",
                    "org_id", "chosen_completion_id", "rejected_completion_id",
                    "chosen_checkpoint_id", "rejected_checkpoint_id", "spec_version"],
    "samples": ["org_id", "trajectory_id", "completion_id", "turn", "checkpoint_id", "arm",
                "task_family", "outcome", "served_at", "prompt", "completion",
                "text_truncated", "prompt_token_ids", "completion_token_ids",
                "behaviour_logprobs", "temperature", "top_p", "top_k", "finish_reason",
                "producer", "tools_offered", "tools_called", "reward", "components", "credit",
                "labels", "spec_version", "source_partition", "source_offset", "event_id"],
}


@pytest.mark.slow
def test_two_exports_of_a_range_are_the_same_bytes_and_equal_the_replay(
        kafka: Settings, tmp_path: Path) -> None:
    produce(kafka, LOG[:500])
    produce(kafka, LOG[500:])  # records after the range: never in it
    first = cli_export(kafka, ORG, tmp_path / "a", "--to", "0:500", "--format", "jsonl")
    second = cli_export(kafka, ORG, tmp_path / "b", "--from", "0:0", "--to", "0:500", "--format",
                        "jsonl")
    assert first == second and first["source"]["partitions"] == {"0": {"from": 0, "to": 500}}
    for name in ("train.jsonl", "manifest.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    replayed = of_org(replay_rows(kafka_rows(kafka, stops={0: 500}), SPEC, RETENTION_MS), ORG)
    expected, _ = samples_view([r for record in replayed.records for r in sample_rows(record)])
    exported = [json.loads(line) for line in (tmp_path / "a" / "train.jsonl").open()]
    assert exported == expected and len(exported) == first["counts"]["completions"] > 10
    assert all(row["prompt"] and row["completion"] for row in exported)


def test_datasets_reads_every_view_in_both_formats_with_the_documented_columns(
        kafka: Settings, tmp_path: Path) -> None:
    import datasets

    produce(kafka, LOG)
    for view, columns in COLUMNS.items():
        for file_format in ("jsonl", "parquet"):
            out = tmp_path / f"{view}-{file_format}"
            manifest = run_export(kafka, org_id=ORG, out_dir=out, start=None, stop=None,
                                  spec=SPEC, view=view, file_format=file_format,
                                  retention_ms=RETENTION_MS)
            dataset = datasets.load_dataset(str(out), split="train",
                                            cache_dir=str(tmp_path / "hf-cache"))
            assert dataset.column_names == columns, (view, file_format)
            assert dataset.num_rows == manifest["files"][0]["rows"] > 0, (view, file_format)
    binary = datasets.load_dataset(str(tmp_path / "binary-parquet"), split="train",
                                   cache_dir=str(tmp_path / "hf-cache"))
    assert set(binary["label"]) == {True, False}


def test_times_resolve_to_the_offsets_the_manifest_names(kafka: Settings,
                                                         tmp_path: Path) -> None:
    produce(kafka, LOG[:300])
    time.sleep(0.05)  # record timestamps are milliseconds: the second part starts later
    middle = time.time()
    time.sleep(0.05)
    produce(kafka, LOG[300:])
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(middle)) + \
        f".{int(middle * 1000) % 1000:03d}+00:00"
    early = run_export(kafka, org_id=ORG, out_dir=tmp_path / "early", start=None,
                       stop=parse_bound(stamp, "--to"), spec=SPEC, view="samples",
                       file_format="parquet", retention_ms=RETENTION_MS)
    late = run_export(kafka, org_id=ORG, out_dir=tmp_path / "late",
                      start=parse_bound(stamp, "--from"), stop=None, spec=SPEC, view="samples",
                      file_format="parquet", retention_ms=RETENTION_MS)
    assert early["source"]["partitions"]["0"] == {"from": 0, "to": 300}
    assert late["source"]["partitions"]["0"] == {"from": 300, "to": len(LOG)}
    again = run_export(kafka, org_id=ORG, out_dir=tmp_path / "again", start={0: 0},
                       stop={0: 300}, spec=SPEC, view="samples", file_format="parquet",
                       retention_ms=RETENTION_MS)
    assert again == early
    assert (tmp_path / "again" / "train.parquet").read_bytes() == \
        (tmp_path / "early" / "train.parquet").read_bytes()

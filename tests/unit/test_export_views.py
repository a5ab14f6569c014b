"""The export's views and their stated rules, its range bounds, and its files: the same rows
always give the same bytes, and the manifest names them."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from schemas.samples import SampleRow
from streams.errors import ExportError
from streams.export import ExportRange, export_log, parse_bound, write_export
from streams.simlog import SimConfig, simulate_log
from streams.spec import load_spec
from streams.views import binary_view, preference_view, samples_view

SPEC = load_spec()


def row(completion_id: str, credit: float, **fields: Any) -> SampleRow:
    values: dict[str, Any] = {
        "org_id": "acme", "trajectory_id": f"t-{completion_id}", "completion_id": completion_id,
        "turn": 0, "checkpoint_id": "ckpt-1", "arm": "control", "task_family": "fix",
        "outcome": "completed", "served_at": None, "prompt": "user: fix it",
        "completion": f"reply {completion_id}", "text_truncated": False,
        "prompt_token_ids": [1, 2], "completion_token_ids": [3], "behaviour_logprobs": [-0.5],
        "temperature": 1.0, "top_p": 1.0, "top_k": -1, "finish_reason": "stop",
        "producer": "gateway", "tools_offered": None, "tools_called": [], "reward": credit,
        "components": {"turns": credit}, "credit": credit, "labels": None,
        "spec_version": "v1", "source_partition": 0, "source_offset": 0, "event_id": None}
    return SampleRow.model_validate(values | fields)


def test_binary_labels_a_completion_by_its_credit_against_its_familys_mean() -> None:
    rows = [row("a", 1.0), row("b", -1.0), row("c", 0.0), row("d", -5.0, task_family="docs"),
            row("e", -3.0, task_family="docs"), row("f", 9.0, prompt=None)]
    out, skipped = binary_view(rows)
    # fix: mean of 1, -1, 0, 9 is 2.25; docs: mean -4
    assert {r["completion_id"]: (r["label"], r["advantage"]) for r in out} == {
        "a": (False, -1.25), "b": (False, -3.25), "c": (False, -2.25), "d": (False, -1.0),
        "e": (True, 1.0)}
    assert skipped == {"no_text": 1}
    assert set(out[0]) >= {"prompt", "completion", "label"}
    out, skipped = binary_view([row("a", 1.0), row("b", 1.0)])
    assert out == [] and skipped == {"zero_advantage": 2}


def test_preferences_pair_best_with_worst_of_one_orgs_same_prompt() -> None:
    same = [row(c, credit) for c, credit in (("a", 3.0), ("b", 1.0), ("c", 2.0), ("d", -1.0),
                                             ("e", 0.0))]
    other_prompt = row("f", 5.0, prompt_token_ids=[9, 9])
    other_org = row("g", -7.0, org_id="beta")
    out, skipped = preference_view([*same, other_prompt, other_org])
    assert [(p["chosen_completion_id"], p["rejected_completion_id"]) for p in out] == [
        ("a", "d"), ("c", "e")]
    assert out[0] | {"chosen": "reply a", "rejected": "reply d", "prompt": "user: fix it",
                     "chosen_credit": 3.0, "rejected_credit": -1.0} == out[0]
    assert skipped == {"unpaired": 3}  # b in the middle, the lone f and g
    tied, skipped = preference_view([row("a", 1.0), row("b", 1.0)])
    assert tied == [] and skipped == {"unpaired": 2}
    same_text, _ = preference_view([row("a", 2.0, completion="x"), row("b", 1.0, completion="x")])
    assert same_text == []


def test_the_samples_view_is_every_row_in_log_order() -> None:
    rows = [row("b", 1.0, source_offset=7), row("a", 1.0, source_offset=3),
            row("c", 0.0, source_partition=1, source_offset=0, prompt=None)]
    out, skipped = samples_view(rows)
    assert [r["completion_id"] for r in out] == ["a", "b", "c"] and not skipped
    assert out[2]["prompt"] is None and out[0]["prompt_token_ids"] == [1, 2]


def test_bounds_are_offsets_per_partition_or_a_time_with_a_zone() -> None:
    assert parse_bound(None, "--from") is None
    assert parse_bound("0:10,2:7", "--from") == {0: 10, 2: 7}
    assert parse_bound("2026-03-01T00:00:00Z", "--to") == 1_772_323_200_000
    with pytest.raises(ExportError, match="--to '2026-03-01T00:00:00' has no time zone"):
        parse_bound("2026-03-01T00:00:00", "--to")
    with pytest.raises(ExportError, match="--from 'last week' is neither offsets"):
        parse_bound("last week", "--from")


@pytest.mark.parametrize("file_format", ["jsonl", "parquet"])
def test_one_range_always_writes_the_same_bytes_and_the_manifest_names_them(
        tmp_path: Path, file_format: str) -> None:
    log = [(0, offset, value) for offset, (_, value) in enumerate(
        simulate_log(40, seed=9, config=SimConfig(texts=True, mean_start_gap_s=60.0)))]
    span = ExportRange({0: 0}, {0: len(log)})
    written = []
    for attempt in ("one", "two"):
        (rows, _), counts = export_log(log, "org-1", "samples", SPEC, 7 * 86_400_000)
        manifest = write_export(tmp_path / attempt, rows, view="samples",
                                file_format=file_format, org_id="org-1", spec=SPEC,
                                topic="events.raw", span=span, counts=counts)
        written.append({p.name: p.read_bytes() for p in (tmp_path / attempt).iterdir()})
    assert written[0] == written[1] and rows
    assert set(written[0]) == {f"train.{file_format}", "manifest.json"}
    data = written[0][f"train.{file_format}"]
    assert manifest["files"] == [{"path": f"train.{file_format}", "rows": len(rows),
                                  "bytes": len(data),
                                  "sha256": hashlib.sha256(data).hexdigest()}]
    assert manifest["source"]["partitions"] == {"0": {"from": 0, "to": len(log)}}
    assert manifest["spec"]["version"] == SPEC.version and manifest["counts"]["rows"] == len(rows)
    rest = {k: v for k, v in manifest.items() if k != "export_id"}
    assert manifest["export_id"] == hashlib.sha256(
        json.dumps(rest, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert json.loads(written[0]["manifest.json"]) == manifest


def test_an_export_replaces_the_other_formats_file(tmp_path: Path) -> None:
    for file_format in ("parquet", "jsonl"):
        write_export(tmp_path, [], view="binary", file_format=file_format, org_id="acme",
                     spec=SPEC, topic="events.raw", span=ExportRange({}, {}), counts={})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json", "train.jsonl"]
    with pytest.raises(ExportError, match="--format 'csv' is not one of jsonl, parquet"):
        write_export(tmp_path, [], view="binary", file_format="csv", org_id="acme", spec=SPEC,
                     topic="events.raw", span=ExportRange({}, {}), counts={})

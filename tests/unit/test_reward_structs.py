"""The reward join writes each record with msgspec: the same bytes as the pydantic model's
dump, and the same values refused."""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import datetime
from typing import Any

import msgspec
import pytest
from pydantic import ValidationError

from schemas.reward_structs import encode_record, record_struct
from schemas.rewards import VALUE_BOUND, RewardRecord
from streams.facts import Fact, fact_from_json
from streams.fold import fold_all
from streams.reward import record_fields
from streams.simlog import SimConfig, simulate_log
from streams.spec import load_spec

SPEC = load_spec()


def _fields_of(config: SimConfig, seed: int) -> list[dict[str, Any]]:
    """The fields of every trajectory's record in a simulated log, each finalised both ways."""
    facts: dict[str, list[Fact]] = defaultdict(list)
    for offset, (_, raw) in enumerate(simulate_log(120, seed=seed, config=config)):
        fact = fact_from_json(raw, offset)
        facts[fact.key].append(fact)
    return [record_fields(fold_all(own, partition=2), SPEC, by, own[-1].time_ms)
            for own in facts.values() for by in ("complete", "watermark")]


FIELDS = _fields_of(SimConfig(), 0) + _fields_of(SimConfig(texts=True, no_end_p=0.3), 1)


def test_every_record_is_the_models_bytes() -> None:
    assert any(s["prompt_text"] for f in FIELDS for s in f["samples"])
    assert {f["outcome"] for f in FIELDS} >= {"completed", "unfinished"}
    for fields in FIELDS:
        model = RewardRecord.model_validate(fields)
        struct = record_struct(fields)
        assert encode_record(struct) == model.model_dump_json().encode()
        assert encode_record(struct.without_text()) == \
            model.without_text().model_dump_json().encode()


def _changed(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    fields = {**FIELDS[1], "samples": [dict(s) for s in FIELDS[1]["samples"]],
              "components": dict(FIELDS[1]["components"]),
              "signals": dict(FIELDS[1]["signals"])}
    target: Any = fields
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return fields


_REFUSED = [
    (("total",), math.nan), (("total",), math.inf), (("total",), VALUE_BOUND * 10),
    (("components", "latency"), -math.inf), (("components", "latency"), math.nan),
    (("signals", "turns"), -1.0), (("signals", "turns"), VALUE_BOUND * 2),
    (("samples", 0, "credit"), math.inf), (("samples", 0, "behaviour_logprobs"), [math.nan]),
    (("samples", 0, "temperature"), math.inf), (("samples", 0, "offset"), -1),
    (("samples", 0, "prompt_token_ids"), [-3]), (("outcome",), "exploded"),
    (("finalized_by",), "wall clock"), (("finalized_at",), datetime(2026, 1, 1)),
    (("partition",), -1), (("trajectory_id",), 7), (("unknown",), 1),
]
_ACCEPTED = [
    (("total",), VALUE_BOUND), (("total",), -VALUE_BOUND), (("components", "latency"), -0.0),
    (("signals", "turns"), 0.0), (("samples", 0, "credit"), None), (("org_id",), None),
    (("samples", 0, "behaviour_logprobs"), [-1e-300, -12.5]),
]


@pytest.mark.parametrize(("path", "value"), _REFUSED)
def test_a_value_the_model_refuses_is_refused(path: tuple[Any, ...], value: Any) -> None:
    fields = _changed(path, value)
    with pytest.raises(ValidationError):
        RewardRecord.model_validate(fields)
    with pytest.raises(msgspec.ValidationError):
        record_struct(fields)


@pytest.mark.parametrize(("path", "value"), _ACCEPTED)
def test_a_value_at_a_bound_the_model_accepts_reads_back_alike(path: tuple[Any, ...],
                                                               value: Any) -> None:
    """The same record read back (at 1e100 the bytes differ: ``1e100`` against ``1e+100``)."""
    fields = _changed(path, value)
    assert RewardRecord.model_validate_json(encode_record(record_struct(fields))) == \
        RewardRecord.model_validate(fields)

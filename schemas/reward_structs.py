"""msgspec structs of the reward record: how the reward join validates and writes one cheaply.

:class:`schemas.rewards.RewardRecord` defines the record, and every consumer reads it with that
model. The join makes one record per final trajectory; validating its fields with these
structs and encoding them with msgspec costs a fraction of the model's validation and dump,
and gives the same bytes (``tests/unit/test_reward_structs.py`` holds the two to each other on
every record of the simulated log and on the values the model refuses). The bounds are the
model's: every float finite, rewards and measurements inside ``VALUE_BOUND``, counts not
negative, times aware.
"""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from schemas.rewards import VALUE_BOUND

__all__ = ["RecordStruct", "encode_record", "record_struct"]

Finite = Annotated[float, Meta(ge=-sys.float_info.max, le=sys.float_info.max)]
Measurement = Annotated[float, Meta(ge=0.0, le=VALUE_BOUND)]
Reward = Annotated[float, Meta(ge=-VALUE_BOUND, le=VALUE_BOUND)]
Count = Annotated[int, Meta(ge=0)]
Instant = Annotated[datetime, Meta(tz=True)]


class _Strict(msgspec.Struct, forbid_unknown_fields=True):
    """Each subclass says ``kw_only`` too (msgspec does not inherit it), so the fields keep the
    model's order, which is the order of the record's JSON."""


class ToolUse(_Strict, kw_only=True):
    tool: str
    valid: bool
    error_kind: str | None = None


class SampleLabels(_Strict, kw_only=True):
    edits_proposed: Count = 0
    edits_accepted: Count = 0
    edits_rejected: Count = 0
    edits_reverted: Count = 0
    kept_fraction: Annotated[float, Meta(ge=0.0, le=1.0)] | None = None
    dissatisfied_followups: Count = 0
    clarifications: Count = 0


class Sample(_Strict, kw_only=True):
    completion_id: str
    checkpoint_id: str
    prompt_token_ids: list[Count]
    completion_token_ids: list[Count]
    behaviour_logprobs: list[Finite]
    temperature: Finite = 1.0
    top_p: Finite = 1.0
    top_k: int = -1
    producer: str | None = None
    event_id: str | None = None
    offset: Count | None = None
    turn: Count | None = None
    served_at: Instant | None = None
    finish_reason: str | None = None
    prompt_text: str | None = None
    completion_text: str | None = None
    text_truncated: bool = False
    tools_offered: list[str] | None = None
    tools_called: list[ToolUse] = msgspec.field(default_factory=list)
    labels: SampleLabels | None = None
    credit: Reward | None = None


class RecordStruct(_Strict, kw_only=True):
    trajectory_id: str
    spec_version: str
    checkpoint_id: str
    arm: str
    org_id: str | None = None
    partition: Count | None = None
    task_family: str = "default"
    outcome: Literal["completed", "aborted", "error", "unfinished"]
    ended_at: Instant | None = None
    finalized_by: Literal["complete", "watermark"]
    finalized_at: Instant
    samples: list[Sample]
    components: dict[str, Reward]
    total: Reward
    signals: dict[str, Measurement]
    event_ids: list[str]

    def without_text(self) -> RecordStruct:
        """:meth:`schemas.rewards.RewardRecord.without_text`: the samples' text left out,
        marked cut."""
        return msgspec.structs.replace(self, samples=[
            msgspec.structs.replace(s, prompt_text=None, completion_text=None,
                                    text_truncated=True)
            if s.prompt_text is not None or s.completion_text is not None else s
            for s in self.samples])


def record_struct(fields: dict[str, Any]) -> RecordStruct:
    """The record of ``fields`` (a :class:`~schemas.rewards.RewardRecord`'s, as Python
    values), validated; raises ``msgspec.ValidationError`` naming the field at fault."""
    return msgspec.convert(fields, RecordStruct)


_ENCODER = msgspec.json.Encoder()


def encode_record(record: RecordStruct) -> bytes:
    """The record's JSON, byte for byte ``RewardRecord.model_dump_json()`` of the same record
    (floats of 1e16 and above aside, written ``1e16`` rather than ``1e+16``: the same number)."""
    return _ENCODER.encode(record)

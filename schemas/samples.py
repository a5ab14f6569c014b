"""The samples view: one row per served completion, made from a reward record alone.

A reward record (``schemas.rewards``) holds its trajectory's completions with what each one
needs; :func:`sample_rows` flattens it into rows that also carry the trajectory's reward and
components, the spec version and where on ``events.raw`` the completion was. Being a pure
function of the record, it gives the same rows wherever the record came from: the ``rewards``
topic as the worker wrote it, or an offline replay of the same log (the export, the trainer's
consumer and tests all read rows through it).

``credit`` is the completion's share of the total by the rule of ``streams/reward.py`` (the
credits of a trajectory add up to its reward); a record written before credits existed shares
its total equally.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, NonNegativeInt

from schemas.rewards import RewardRecord, SampleLabels, ToolUse

__all__ = ["SampleRow", "sample_rows"]


class SampleRow(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)

    org_id: str | None
    trajectory_id: str
    completion_id: str
    turn: NonNegativeInt | None
    checkpoint_id: str  # the checkpoint that served it
    arm: str
    task_family: str
    outcome: str  # the trajectory's
    served_at: AwareDatetime | None
    prompt: str | None  # text, where the org allowed it
    completion: str | None
    text_truncated: bool
    prompt_token_ids: list[NonNegativeInt]
    completion_token_ids: list[NonNegativeInt]
    behaviour_logprobs: list[float]  # one per completion token, as served
    temperature: float
    top_p: float
    top_k: int
    finish_reason: str | None
    producer: str | None
    tools_offered: list[str] | None
    tools_called: list[ToolUse]
    reward: float  # the trajectory's total
    components: dict[str, float]  # the trajectory's, by name
    credit: float
    labels: SampleLabels | None
    spec_version: str
    source_partition: NonNegativeInt | None  # events.raw partition of its completion.served
    source_offset: NonNegativeInt | None
    event_id: Annotated[str | None, Field(description="its completion.served event")]


def sample_rows(record: RewardRecord) -> list[SampleRow]:
    """One row per completion of ``record``, in turn order."""
    equal_share = record.total / len(record.samples) if record.samples else 0.0
    return [SampleRow(
        org_id=record.org_id, trajectory_id=record.trajectory_id,
        completion_id=s.completion_id, turn=s.turn, checkpoint_id=s.checkpoint_id,
        arm=record.arm, task_family=record.task_family, outcome=record.outcome,
        served_at=s.served_at, prompt=s.prompt_text, completion=s.completion_text,
        text_truncated=s.text_truncated, prompt_token_ids=s.prompt_token_ids,
        completion_token_ids=s.completion_token_ids, behaviour_logprobs=s.behaviour_logprobs,
        temperature=s.temperature, top_p=s.top_p, top_k=s.top_k,
        finish_reason=s.finish_reason, producer=s.producer, tools_offered=s.tools_offered,
        tools_called=s.tools_called, reward=record.total, components=record.components,
        credit=s.credit if s.credit is not None else equal_share, labels=s.labels,
        spec_version=record.spec_version, source_partition=record.partition,
        source_offset=s.offset, event_id=s.event_id,
    ) for s in record.samples]

"""The reward record: one per final trajectory and reward-spec version, on the ``rewards`` topic.

It is the wire contract between the stream processors (which produce it) and the trainer and
monitors (which consume it). It carries the training samples as served (token ids and the
behaviour log-probabilities of the checkpoint that produced them), every reward component
separately, the raw signals they came from, and the event ids they were computed from.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

__all__ = ["RewardRecord", "Sample", "reward_record_key"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Sample(_Strict):
    """One served completion of the trajectory, as the policy-gradient update needs it."""

    completion_id: str
    checkpoint_id: str
    prompt_token_ids: list[int]
    completion_token_ids: list[int]
    behaviour_logprobs: list[float]  # one per completion token, logged at serving time
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1


class RewardRecord(_Strict):
    trajectory_id: str
    spec_version: str  # content hash of the reward spec that scored it
    checkpoint_id: str
    arm: str
    org_id: str | None = None
    task_family: str = "default"
    outcome: Literal["completed", "aborted", "error", "unfinished"]
    ended_at: AwareDatetime | None = None  # event time of trajectory.ended, if it came
    finalized_by: Literal["complete", "watermark"]
    finalized_at: AwareDatetime  # event time (watermark) at finalisation, never wall-clock
    samples: list[Sample]
    # Named, weighted reward terms; total == sum(components.values()).
    components: dict[str, float]
    total: float
    # Raw measurements the components were computed from (counts, fractions, milliseconds).
    signals: dict[str, float]
    event_ids: Annotated[list[str], Field(description="ids of the events the record folds")]


def reward_record_key(trajectory_id: str, spec_version: str) -> bytes:
    """The Kafka key of a reward record: idempotent per trajectory and spec version."""
    return f"{trajectory_id}|{spec_version}".encode()

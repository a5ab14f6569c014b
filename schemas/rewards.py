"""The reward record: one per final trajectory and reward-spec version, on the ``rewards`` topic.

It is the wire contract between the stream processors (which produce it) and the trainer and
monitors (which consume it). It carries the training samples as served (token ids and the
behaviour log-probabilities of the checkpoint that produced them), every reward component
separately, the raw signals they came from, and the event ids they were computed from.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, NonNegativeInt

__all__ = ["VALUE_BOUND", "Component", "RewardRecord", "Sample", "Signal", "reward_record_key",
           "trajectory_key"]

# Rewards and measurements stay far inside a float's range, so sums of their squares over any
# window or batch stay finite: a record holding 1e308 would turn the monitors' window statistics
# and the trainer's advantages into inf. No reward spec or measurement comes near it.
VALUE_BOUND = 1e100
Measurement = Annotated[float, Field(ge=0.0, le=VALUE_BOUND)]  # counts, fractions, milliseconds
Reward = Annotated[float, Field(ge=-VALUE_BOUND, le=VALUE_BOUND)]


class Signal:
    """The names of a record's ``signals``: raw measurements of its trajectory (what each
    counts: ``streams/REWARDS.md``). Plain strings, as they appear in the record."""

    COMPLETIONS: Final = "completions"
    COMPLETIONS_FAILED: Final = "completions_failed"  # finished by abort or error
    EDITS_PROPOSED: Final = "edits_proposed"
    EDITS_ACCEPTED: Final = "edits_accepted"
    EDITS_REJECTED: Final = "edits_rejected"
    EDITS_REVERTED: Final = "edits_reverted"
    EDITS_UNDECIDED: Final = "edits_undecided"
    KEPT_FRACTION: Final = "kept_fraction"  # share of proposed edits kept, longest horizon
    PERSISTENCE_CHECKS: Final = "persistence_checks"
    PERSISTENCE_MISSING: Final = "persistence_missing"
    TOOL_CALLS: Final = "tool_calls"
    BROKEN_TOOL_CALLS: Final = "broken_tool_calls"
    CLARIFICATIONS: Final = "clarifications"
    CLARIFICATIONS_UNAMBIGUOUS: Final = "clarifications_unambiguous"
    FOLLOWUPS: Final = "followups"
    DISSATISFIED_FOLLOWUPS: Final = "dissatisfied_followups"
    LATENCY_MS_MEAN: Final = "latency_ms_mean"
    TTFT_MS_MEAN: Final = "ttft_ms_mean"
    TURNS: Final = "turns"

    @staticmethod
    def kept_fraction_at(horizon_s: int) -> str:
        """The share of proposed edits kept at one horizon of the spec."""
        return f"kept_fraction_{horizon_s}s"


class Component:
    """The names of a record's ``components``: the spec's weighted terms, each one weight times
    one signal (``streams/REWARDS.md``). Plain strings, as they appear in the record."""

    ACCEPTED_EDITS: Final = "accepted_edits"
    REJECTED_EDITS: Final = "rejected_edits"
    REVERTED_EDITS: Final = "reverted_edits"
    DISSATISFIED_FOLLOWUPS: Final = "dissatisfied_followups"
    LATENCY: Final = "latency"
    BROKEN_TOOL_CALLS: Final = "broken_tool_calls"
    DEFERRED_EDITS: Final = "deferred_edits"  # clarifying questions on unambiguous requests
    TURNS: Final = "turns"
    OUTCOME: Final = "outcome"

    @staticmethod
    def kept_at(horizon_s: int) -> str:
        """The term of the edits kept at one horizon of the spec."""
        return f"kept_{horizon_s}s"


class _Strict(BaseModel):
    # Not a number is never a reward: a non-finite value fails validation where it is made.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


class Sample(_Strict):
    """One served completion of the trajectory, as the policy-gradient update needs it."""

    completion_id: str
    checkpoint_id: str
    prompt_token_ids: list[NonNegativeInt]
    completion_token_ids: list[NonNegativeInt]
    behaviour_logprobs: list[float]  # one per completion token, logged at serving time
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    # Who wrote the completion to the log ("gateway", or "ingest:<key>"): the trainer trains only
    # on the gateway's, whose behaviour logprobs are what the policy really sampled with.
    producer: str | None = None


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
    components: dict[str, Reward]
    total: Reward
    # Raw measurements the components were computed from (counts, fractions, milliseconds).
    signals: dict[str, Measurement]
    event_ids: Annotated[list[str], Field(description="ids of the events the record folds")]


def _escaped(identifier: str) -> str:
    # Identifiers may contain "|": escaping it keeps two orgs' keys apart whatever their ids.
    if "|" not in identifier and "%" not in identifier:
        return identifier  # the usual case, once per event on the join's hot path
    return identifier.replace("%", "%25").replace("|", "%7C")


def trajectory_key(org_id: str | None, trajectory_id: str) -> str:
    """``org|trajectory``: a trajectory is identified within its organisation, so two orgs'
    equal trajectory ids are two trajectories. ``%`` and ``|`` inside an id are escaped
    (``%25``, ``%7C``), so distinct (org, trajectory) pairs never share a key. A record
    written before the org was carried has the empty org."""
    return f"{_escaped(org_id or '')}|{_escaped(trajectory_id)}"


def reward_record_key(org_id: str | None, trajectory_id: str, spec_version: str) -> bytes:
    """The Kafka key of a reward record, ``org|trajectory|spec``: idempotent per trajectory
    and spec version, and never shared by two orgs."""
    return f"{trajectory_key(org_id, trajectory_id)}|{spec_version}".encode()

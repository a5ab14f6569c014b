"""The reward record: one per final trajectory and reward-spec version, on the ``rewards`` topic.

It is the wire contract between the stream processors (which produce it) and the trainer and
monitors (which consume it). It carries the training samples as served (token ids and the
behaviour log-probabilities of the checkpoint that produced them), every reward component
separately, the raw signals they came from, and the event ids they were computed from.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, NonNegativeInt

__all__ = ["VALUE_BOUND", "Component", "RewardRecord", "Sample", "SampleLabels", "Signal",
           "ToolUse", "reward_record_key", "trajectory_key"]

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


class ToolUse(_Strict):
    """A tool call the completion made, as ``tool.called`` recorded it."""

    tool: str
    valid: bool
    error_kind: str | None = None


class SampleLabels(_Strict):
    """What users did with the completion's work (``streams/reward.py`` says which events are
    a completion's): its edits by their latest decision, the share of them kept at the spec's
    largest horizon (None: it proposed none), dissatisfied follow-ups and clarifying
    questions after it."""

    edits_proposed: NonNegativeInt = 0
    edits_accepted: NonNegativeInt = 0
    edits_rejected: NonNegativeInt = 0
    edits_reverted: NonNegativeInt = 0
    kept_fraction: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    dissatisfied_followups: NonNegativeInt = 0
    clarifications: NonNegativeInt = 0


class Sample(_Strict):
    """One served completion of the trajectory, as the policy-gradient update needs it, and
    what per-completion views need (the fields after ``producer``; a record written before
    them has their defaults)."""

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
    event_id: str | None = None  # of its completion.served
    offset: NonNegativeInt | None = None  # of its completion.served on the record's partition
    turn: NonNegativeInt | None = None  # its place among the trajectory's completions, from 0
    served_at: AwareDatetime | None = None  # its event time
    finish_reason: str | None = None
    prompt_text: str | None = None  # as the org's text policy let the gateway write it
    completion_text: str | None = None
    text_truncated: bool = False
    tools_offered: list[str] | None = None
    tools_called: list[ToolUse] = Field(default_factory=list)
    labels: SampleLabels | None = None
    # Its share of the total by the stated rule (streams/reward.py): the credits of a record's
    # samples add up to its total.
    credit: Reward | None = None


class RewardRecord(_Strict):
    trajectory_id: str
    spec_version: str  # content hash of the reward spec that scored it
    checkpoint_id: str
    arm: str
    org_id: str | None = None
    partition: NonNegativeInt | None = None  # of events.raw, where its events are
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

    def without_text(self) -> RewardRecord:
        """The record with its samples' text left out (marked cut): what the rewards topic
        gets when the record with its text would be over the topic's size limit."""
        return self.model_copy(update={"samples": [
            s.model_copy(update={"prompt_text": None, "completion_text": None,
                                 "text_truncated": True})
            if s.prompt_text is not None or s.completion_text is not None else s
            for s in self.samples]})


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

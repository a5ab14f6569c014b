"""The agent loop: policy completions → parsed tool calls → sandboxed tools → observations.

One trajectory runs until the policy replies (a final answer), the user gives up on a clarifying
question, or the turn budget is spent. Everything that happens is emitted as an event through
the recorder: ``completion.served`` (only for in-process policies; a gateway emits its own),
``tool.called`` for every call including broken ones (except those the gateway already
recorded itself), ``edit.proposed``, ``clarification.asked`` and ``trajectory.ended``. The
simulated user adds its reactions.

The conversation is kept in OpenAI's shape: an assistant turn carries the endpoint's
``tool_calls`` when it parsed them, and each call's observation is a ``tool`` message naming
its call.
"""

from __future__ import annotations

import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import PolicyError
from harness.instrument import EventSink, Recorder, SimClock, TrajectoryContext
from harness.policy.base import Completion, Message, Policy
from harness.tasks.base import Task, materialise, run_hidden_tests
from harness.tools.calls import (
    BrokenCall,
    ParsedAction,
    ToolCall,
    action_from_tool_calls,
    parse_action,
)
from harness.tools.executor import CallOutcome, ToolBox
from harness.tools.sandbox import SandboxLimits
from harness.users import Review, SimulatedUser
from schemas.events import (
    ClarificationAskedPayload,
    CompletionServedPayload,
    EditProposedPayload,
    SamplingParams,
    ToolCalledPayload,
    TrajectoryEndedPayload,
    TrajectoryOutcome,
)

__all__ = ["AgentConfig", "Episode", "run_episode", "run_trajectory"]


@dataclass(frozen=True)
class AgentConfig:
    max_turns: int = 6
    limits: SandboxLimits = SandboxLimits()


@dataclass
class Episode:
    task: Task
    messages: list[Message]
    completions: list[Completion] = field(default_factory=list)
    outcomes: list[CallOutcome] = field(default_factory=list)
    edit_ids: list[str] = field(default_factory=list)
    questions: int = 0
    turns: int = 0
    outcome: TrajectoryOutcome = "aborted"
    passed: bool | None = None  # hidden tests on the final workspace, when they were run
    isolated: bool | None = None  # whether they (and every run) had the sandbox's isolation
    review: Review | None = None

    @property
    def broken_calls(self) -> int:
        return sum(o.error_kind in ("malformed_call", "unknown_tool", "bad_arguments")
                   for o in self.outcomes)


def _served(completion: Completion) -> CompletionServedPayload:
    return CompletionServedPayload(
        completion_id=completion.completion_id, model=completion.model,
        prompt_token_ids=completion.prompt_token_ids, completion_token_ids=completion.token_ids,
        behaviour_logprobs=completion.logprobs, ttft_ms=completion.ttft_ms,
        latency_ms=completion.latency_ms, finish_reason=completion.finish_reason,
        sampling=SamplingParams(temperature=completion.temperature),
    )


def _record_calls(episode: Episode, calls: tuple[ToolCall | BrokenCall, ...],
                  outcomes: list[CallOutcome], recorder: Recorder) -> None:
    """Emit each call's events and answer it with a ``tool`` message, in call order."""
    for call, outcome in zip(calls, outcomes, strict=True):
        recorder.clock.advance(outcome.duration_ms / 1000)
        call_id = f"{recorder.context.trajectory_id}-c{len(episode.outcomes)}"
        if not (isinstance(call, BrokenCall) and call.recorded):  # the gateway recorded it
            recorder.emit(ToolCalledPayload(
                call_id=call_id, tool=outcome.tool[:64] or "unknown", valid=outcome.valid,
                error_kind=outcome.error_kind, duration_ms=outcome.duration_ms,
                parallel_group=outcome.parallel_group))
        episode.outcomes.append(outcome)
        episode.messages.append({"role": "tool", "tool_call_id": call.call_id or call_id,
                                 "content": outcome.observation.rstrip()})
        if outcome.edit is not None:
            edit_id = f"{recorder.context.trajectory_id}-e{len(episode.edit_ids)}"
            episode.edit_ids.append(edit_id)
            recorder.emit(EditProposedPayload(
                edit_id=edit_id, path=outcome.edit.path, lines_added=outcome.edit.lines_added,
                lines_removed=outcome.edit.lines_removed))


def _assistant_message(completion: Completion) -> Message:
    message: dict[str, Any] = {"role": "assistant", "content": completion.text}
    if completion.tool_calls:
        message["tool_calls"] = [dict(call) for call in completion.tool_calls]
    return message


def _action(completion: Completion, toolbox: ToolBox) -> ParsedAction:
    """What the completion does; the harness judges every call the gateway did not."""
    if not completion.tool_calls and completion.verdicts is None:
        return parse_action(completion.text, toolbox.specs)
    return action_from_tool_calls(completion.text, completion.tool_calls,
                                  completion.verdicts or (), toolbox.specs)


def run_episode(
    task: Task, policy: Policy, toolbox: ToolBox, recorder: Recorder,
    user: SimulatedUser | None = None, config: AgentConfig = AgentConfig(), seed: int = 0,
) -> Episode:
    """Run the loop on a materialised workspace; returns what happened (events already sent)."""
    episode = Episode(task, [{"role": "user", "content": task.request}])
    for turn in range(config.max_turns):
        episode.turns = turn + 1
        try:
            completion = policy.complete(episode.messages, seed=seed * 1000 + turn,
                                         context=recorder.context)
        except PolicyError:
            episode.outcome = "error"
            break
        recorder.checkpoint_id = completion.checkpoint_id
        recorder.clock.advance(completion.latency_ms / 1000)
        if policy.emits_completion_events:
            recorder.emit(_served(completion))
        episode.completions.append(completion)
        episode.messages.append(_assistant_message(completion))
        action = _action(completion, toolbox)
        if action.reply is not None and not action.reply.is_question:
            episode.outcome = "completed"
            break
        if action.reply is not None:
            episode.questions += 1
            recorder.emit(ClarificationAskedPayload(request_ambiguity=task.ambiguity))
            answer = user.answer_question(task, recorder, episode.questions) if user else None
            if answer is None:
                break
            episode.messages.append({"role": "user", "content": answer})
            continue
        _record_calls(episode, action.calls, toolbox.execute(action.calls), recorder)
    recorder.emit(TrajectoryEndedPayload(outcome=episode.outcome, turns=episode.turns,
                                         task_family=task.family))
    return episode


def run_trajectory(
    task: Task, policy: Policy, sink: EventSink, *, user: SimulatedUser | None = None,
    clock: SimClock | None = None, context: TrajectoryContext | None = None,
    config: AgentConfig = AgentConfig(), seed: int = 0,
) -> Episode:
    """One whole trajectory: a fresh workspace, the loop, the hidden tests, the user's review."""
    context = context or TrajectoryContext(
        trajectory_id=f"traj-{uuid.uuid4().hex[:12]}", session_id=f"sess-{uuid.uuid4().hex[:8]}",
        user=f"user-{seed % 97}")
    recorder = Recorder(sink, context, clock or SimClock())
    with tempfile.TemporaryDirectory(prefix="rs-task-") as tmp:
        workspace = materialise(task, Path(tmp) / "ws")
        episode = run_episode(task, policy, ToolBox(workspace, config.limits), recorder, user,
                              config, seed)
        hidden = run_hidden_tests(task, workspace, config.limits.allow_unisolated)
        episode.passed, episode.isolated = hidden.passed, hidden.isolated
    if user is not None:
        episode.review = user.review(episode.edit_ids, episode.passed, recorder)
    return episode

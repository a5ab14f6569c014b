"""The scripted expert: solves a task it knows, in the harness's tool syntax.

Its transcripts are the demonstrations the tiny policy is warm-started on. A :class:`DemoMix`
makes it imperfect on purpose (plausible wrong fixes, needless questions, malformed calls) so
that the warm-started policy leaves room for RL; the ``clarify`` and ``broken-calls`` mixes are
the reward-hacking policies the demo's monitors should catch: asking instead of editing on clear
requests, and emitting broken calls instead of attempting hard tasks.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from harness.instrument import TrajectoryContext
from harness.policy.base import Completion, Message
from harness.tasks.base import Task
from harness.tools.calls import format_call

__all__ = ["MIXES", "DemoMix", "ExpertPolicy", "expert_plan"]

QUESTION = "Which file and function should I change?"
DONE = "Done."
LINT = format_call("lint", {})  # lists the workspace's numbered quick fixes


@dataclass(frozen=True)
class DemoMix:
    wrong_fix: float = 0.0  # edits with the task's plausible wrong fix
    needless_question: float = 0.0  # asks a clarifying question on a clear request
    malformed: float = 0.0  # one malformed call, then the corrected one
    broken_on_hard: float = 0.0  # on hard tasks: broken edit calls, then gives up


MIXES = {
    "expert": DemoMix(),
    # Wrong often enough to leave RL room, right more often than not so that SFT must learn
    # which fix suits which bug: at even odds every family looks alike to the warm policy, and
    # RL's updates moved the fix numbers of all families together (off-by-one's right number
    # is another family's wrong one).
    "warm": DemoMix(wrong_fix=0.3, needless_question=0.1, malformed=0.1),
    "clarify": DemoMix(wrong_fix=0.4, needless_question=0.9, malformed=0.1),
    "broken-calls": DemoMix(wrong_fix=0.4, needless_question=0.1, malformed=0.1,
                            broken_on_hard=0.9),
}


def _corrupt(call: str, rng: random.Random) -> str:
    """A malformed version of a well-formed call, of the kinds small models actually make."""
    kind = rng.randrange(3)
    if kind == 0:
        return call.removesuffix("</tool>")
    if kind == 1:
        return call.replace('"}', "}", 1) if '"}' in call else call.replace("{", "", 1)
    return call.replace('{"', '{', 1) if '{"' in call else call.replace(" {}", "", 1)


def expert_plan(task: Task, mix: DemoMix, rng: random.Random) -> list[str]:
    """The completions the expert will send, in order."""
    plan: list[str] = []
    if task.clarity == "ambiguous" or rng.random() < mix.needless_question:
        plan.append(QUESTION)
    plan.append(LINT)
    edits = task.wrong_solution if rng.random() < mix.wrong_fix else task.solution
    calls = [format_call("edit_file", {"fix": task.fix_number(e)}) for e in edits]
    if task.hard and rng.random() < mix.broken_on_hard:
        plan.extend(["".join(_corrupt(c, rng) for c in calls), DONE])
        return plan
    plan.append("".join(calls))
    if rng.random() < mix.malformed:
        step = rng.randrange(max(0, len(plan) - 2), len(plan))  # the edit step or the one before
        if plan[step] != QUESTION:
            plan.insert(step, _corrupt(plan[step], rng))
    plan.append(DONE)
    return plan


class ExpertPolicy:
    """Sends its plan one completion per turn, whatever the observations say."""

    emits_completion_events = False

    def __init__(self, task: Task, mix: DemoMix = DemoMix(), seed: int = 0) -> None:
        self.plan = expert_plan(task, mix, random.Random(f"{seed}|{task.task_id}"))

    def complete(
        self, messages: Sequence[Message], *, seed: int | None = None,
        context: TrajectoryContext | None = None,
    ) -> Completion:
        turn = sum(m["role"] == "assistant" for m in messages)
        text = self.plan[turn] if turn < len(self.plan) else DONE
        return Completion(text=text, checkpoint_id="expert", model="expert", latency_ms=500.0)

"""Bench tasks: the hidden tests fail as shipped, pass with the solution, fail with the wrong fix;
the agent loop emits the expected events for a scripted expert."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.agent import AgentConfig, run_trajectory
from harness.demo.config import DemoConfig
from harness.evals import HarnessEvalSuite
from harness.policy.expert import DemoMix, ExpertPolicy
from harness.tasks import (
    FAMILIES,
    all_tasks,
    held_out_per_family,
    materialise,
    run_hidden_tests,
    sample_tasks,
)
from harness.tasks.base import Edit, Task
from harness.tools.edits import apply_search_replace
from harness.users import SimulatedUser, UserConfig
from schemas.events import EventAdapter

pytestmark = pytest.mark.slow


def _passes(task: Task, edits: tuple[Edit, ...], root: Path) -> bool:
    workspace = materialise(task, root)
    for edit in edits:
        text = workspace.read_text(edit.path)
        workspace.write_text(edit.path, apply_search_replace(text, edit.search, edit.replace,
                                                             edit.path))
    return run_hidden_tests(task, workspace).passed


@pytest.mark.parametrize("task", sample_tasks(4, held_out=True, seed=3),
                         ids=lambda t: t.task_id)
def test_hidden_tests_tell_the_solution_from_the_bug_and_the_wrong_fix(task: Task,
                                                                       tmp_path: Path) -> None:
    assert not _passes(task, (), tmp_path / "as-shipped")
    assert _passes(task, task.solution, tmp_path / "solved")
    assert not _passes(task, task.wrong_solution, tmp_path / "wrong")


@pytest.mark.parametrize("exit_early", [
    "import os\nos._exit(0)\n",
    "import sys\nsys.exit(0)\n",
    "print('all hidden tests passed')\nimport os\nos._exit(0)\n",
    "import atexit, os, sys\natexit.register(print, 'all hidden tests passed')\nsys.exit()\n",
])
def test_exit_status_zero_from_edited_code_does_not_pass(exit_early: str, tmp_path: Path) -> None:
    task = next(t for t in all_tasks() if not t.two_files)
    workspace = materialise(task, tmp_path / "ws")
    path = task.solution[0].path
    workspace.write_text(path, exit_early + workspace.read_text(path))
    hidden = run_hidden_tests(task, workspace)
    assert hidden.run.returncode == 0 and hidden.run.error is None  # a clean exit ...
    assert not hidden.passed  # ... is not a pass: the runner never got to say so


def test_families_are_parametrised_into_many_tasks_with_a_held_out_split() -> None:
    tasks = all_tasks()
    assert len({t.task_id for t in tasks}) == len(tasks)
    for family in FAMILIES:
        of_family = [t for t in tasks if t.family == family]
        assert len(of_family) >= 100
        assert 0.1 < sum(t.held_out for t in of_family) / len(of_family) < 0.3
        assert {t.clarity for t in of_family} == {"clear", "vague", "ambiguous"}


def test_the_gate_scores_every_family_on_as_many_held_out_tasks_as_it_asks_for() -> None:
    # A family short of held-out tasks would be scored on a coarser grid than the others.
    assert DemoConfig.eval_per_family <= held_out_per_family()
    for per_family in (1, DemoConfig.eval_per_family, held_out_per_family()):
        tasks = HarnessEvalSuite(per_family=per_family).tasks()
        assert all(t.held_out for t in tasks)
        assert [sum(t.family == f for t in tasks) for f in FAMILIES] == [per_family] * 3
    for per_family in (0, held_out_per_family() + 1):
        with pytest.raises(ValueError, match=f"per_family={per_family} is outside"):
            HarnessEvalSuite(per_family=per_family)


def test_quick_fixes_offer_the_solution_among_wrong_fixes_in_an_editors_fixed_order() -> None:
    for family in FAMILIES:
        tasks = [t for t in all_tasks() if t.family == family]
        for task in tasks:
            assert set(task.solution + task.wrong_solution) <= set(task.fixes)
            assert len(task.fixes) >= 2 * len(task.solution)
            assert [(e.path, e.replace) for e in task.fixes] == sorted(
                (e.path, e.replace) for e in task.fixes)
    # The right number depends on the bug, not on a rule as simple as "always the first".
    assert {t.fix_number(t.solution[0]) for t in all_tasks()} >= {1, 2, 3}


def _types(events: list) -> list[str]:
    return [e.type for e in events]


def test_an_expert_episode_emits_the_expected_event_sequence() -> None:
    task = next(t for t in all_tasks() if t.clarity == "ambiguous" and t.two_files)
    events: list = []
    user = SimulatedUser(UserConfig(decision_noise=0.0, late_revert=0.0))
    episode = run_trajectory(task, ExpertPolicy(task), events.append, user=user)
    assert episode.passed and episode.outcome == "completed" and episode.turns == 4
    assert _types(events) == [
        "clarification.asked", "followup.sent",  # the question and the user's answer
        "tool.called",  # lint, which lists the quick fixes
        "tool.called", "edit.proposed", "tool.called", "edit.proposed",  # two fixes, two files
        "trajectory.ended", "edit.decided", "edit.decided", "followup.sent",
        "edit.persistence", "edit.persistence", "edit.persistence", "edit.persistence",
    ]
    assert events[0].payload.request_ambiguity == task.ambiguity
    assert events[7].payload.turns == 4 and events[7].payload.task_family == task.family
    times = [e.occurred_at for e in events]
    assert times == sorted(times)
    for event in events:  # every event validates against the wire schema
        assert EventAdapter.validate_json(EventAdapter.dump_json(event)) == event


def test_broken_calls_are_recorded_and_answered_not_dropped() -> None:
    task = next(t for t in all_tasks() if t.clarity == "clear" and not t.two_files)
    events: list = []
    policy = ExpertPolicy(task, DemoMix(malformed=1.0), seed=1)
    episode = run_trajectory(task, policy, events.append, config=AgentConfig(max_turns=6))
    broken = [e.payload for e in events if e.type == "tool.called" and not e.payload.valid]
    assert len(broken) == 1 and broken[0].error_kind in ("malformed_call", "bad_arguments")
    assert episode.broken_calls == 1
    errors = [m["content"] for m in episode.messages if m["content"].startswith("error (")]
    assert len(errors) == 1 and episode.passed


def test_the_eval_suite_counts_each_tasks_broken_calls_for_the_gates_guardrail() -> None:
    suite = HarnessEvalSuite(per_family=2)
    clean = suite.evaluate_policy(ExpertPolicy, seed=0)
    broken = suite.evaluate_policy(lambda task: ExpertPolicy(task, DemoMix(malformed=1.0)), 0)
    assert [r.task_id for r in clean] == [r.task_id for r in broken]
    assert all(r.broken_calls == 0 for r in clean)
    assert all(r.broken_calls == 1 for r in broken) and all(r.score == 1.0 for r in broken)


def test_the_turn_budget_ends_a_trajectory_as_aborted() -> None:
    task = next(t for t in all_tasks() if t.clarity == "clear")
    events: list = []
    episode = run_trajectory(task, ExpertPolicy(task), events.append,
                             config=AgentConfig(max_turns=1))
    assert (episode.outcome, episode.turns, episode.passed) == ("aborted", 1, False)
    assert events[-1].type == "trajectory.ended" and events[-1].payload.outcome == "aborted"


def test_no_task_passes_its_hidden_tests_as_shipped(tmp_path: Path) -> None:
    passing = [t.task_id for i, t in enumerate(all_tasks()) if _passes(t, (), tmp_path / str(i))]
    assert passing == []

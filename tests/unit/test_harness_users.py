"""Simulated users: seeded, keep passing edits, revert failing ones, check persistence in
simulated time, and react to questions by how ambiguous the request was."""

from __future__ import annotations

from datetime import timedelta

import pytest

from harness.instrument import Recorder, SimClock, TrajectoryContext
from harness.tasks import all_tasks
from harness.users import SimulatedUser, UserConfig
from schemas.events import EditDecided, EditPersistence, FollowupSent

QUIET = UserConfig(decision_noise=0.0, late_revert=0.0, horizons_s=(600, 3600))


def _recorder(events: list, trajectory_id: str = "traj-1") -> Recorder:
    return Recorder(events.append, TrajectoryContext(trajectory_id, "sess-1", "user-1"), SimClock())


def _review(user: SimulatedUser, passed: bool, trajectory_id: str = "traj-1"):
    events: list = []
    recorder = _recorder(events, trajectory_id)
    review = user.review(["e0", "e1"], passed, recorder)
    return review, events, recorder


def test_passing_edits_are_kept_and_survive_every_horizon() -> None:
    review, events, _ = _review(SimulatedUser(QUIET), passed=True)
    assert review.decisions == {"e0": "accepted", "e1": "accepted"}
    assert review.surviving == {600: 1.0, 3600: 1.0} and review.sentiment == "satisfied"


def test_failing_edits_are_reverted_and_followed_up_with_dissatisfaction() -> None:
    review, events, _ = _review(SimulatedUser(QUIET), passed=False)
    assert set(review.decisions.values()) == {"reverted"}
    assert review.surviving == {600: 0.0, 3600: 0.0}
    assert [e.payload.sentiment for e in events if isinstance(e, FollowupSent)] == ["dissatisfied"]


def test_persistence_is_emitted_at_each_horizon_in_simulated_time() -> None:
    review, events, recorder = _review(SimulatedUser(QUIET), passed=True)
    ended = recorder.clock.now
    checks = [e for e in events if isinstance(e, EditPersistence)]
    assert [(e.payload.edit_id, e.payload.horizon_s) for e in checks] == [
        ("e0", 600), ("e1", 600), ("e0", 3600), ("e1", 3600)]
    assert [e.occurred_at - ended for e in checks] == [timedelta(seconds=s)
                                                      for s in (600, 600, 3600, 3600)]
    decided = [e for e in events if isinstance(e, EditDecided)]
    assert all(e.occurred_at == ended + timedelta(seconds=20) for e in decided)
    assert recorder.clock.now == ended  # reviewing does not move the trajectory clock


def test_the_same_seed_gives_the_same_reactions_and_noise_shows_up_across_trajectories() -> None:
    noisy = UserConfig(decision_noise=0.3, late_revert=0.3)
    runs = [[_review(SimulatedUser(noisy, seed=7), True, f"t{i}")[0] for i in range(40)]
            for _ in range(2)]
    assert runs[0] == runs[1]
    decisions = [d for review in runs[0] for d in review.decisions.values()]
    assert 0 < decisions.count("rejected") < len(decisions) / 2
    other_seed = [_review(SimulatedUser(noisy, seed=8), True, f"t{i}")[0] for i in range(40)]
    assert other_seed != runs[0]


@pytest.mark.parametrize(("clarity", "sentiment"), [("ambiguous", "neutral"),
                                                    ("clear", "dissatisfied")])
def test_questions_are_answered_by_how_ambiguous_the_request_was(clarity: str,
                                                                 sentiment: str) -> None:
    task = next(t for t in all_tasks() if t.clarity == clarity)
    always_answers = SimulatedUser(UserConfig(gives_up_on_needless_question=0.0))
    events: list = []
    assert always_answers.answer_question(task, _recorder(events)) == task.clarification
    assert [e.payload.sentiment for e in events] == [sentiment]


def test_users_give_up_on_needless_questions_only() -> None:
    impatient = SimulatedUser(UserConfig(gives_up_on_needless_question=1.0))
    clear = next(t for t in all_tasks() if t.clarity == "clear")
    ambiguous = next(t for t in all_tasks() if t.clarity == "ambiguous")
    answers = [impatient.answer_question(t, _recorder([], f"t{i}")) for i in range(20)
               for t in (clear, ambiguous)]
    assert answers[1::2] == [ambiguous.clarification] * 20
    assert answers[0::2].count(None) > 10

"""The suite's own rule on tier markers (``tests/support/tiers.py``), which the root conftest
applies to every collected test before ``-m`` deselects any."""

from __future__ import annotations

from collections.abc import Iterable

from tests.support.tiers import TestShape, tier_problem, tier_problems


def _shape(nodeid: str, markers: Iterable[str] = (), fixtures: Iterable[str] = ()) -> TestShape:
    return TestShape(nodeid, frozenset(markers), frozenset(fixtures))


def test_an_unmarked_integration_test_would_run_in_the_fast_tier_and_is_refused() -> None:
    problem = tier_problem(_shape("tests/integration/test_x.py::test_y", {"parametrize"}))
    assert problem is not None and "tests/integration" in problem and "fast tier" in problem
    assert tier_problem(_shape("tests/integration/test_x.py::test_y", {"slow"})) is None
    assert tier_problem(_shape("tests/contracts/test_x.py::T::test_y", {"kafka"},
                               {"kafka", "kafka_settings"})) is None


def test_a_test_handed_a_broker_must_be_marked_kafka_wherever_it_lives() -> None:
    for nodeid in ("tests/integration/test_x.py::test_y", "tests/abuse/test_x.py::test_y",
                   "tests/elsewhere/test_x.py::test_y"):
        problem = tier_problem(_shape(nodeid, {"slow", "abuse"}, {"kafka_settings"}))
        assert problem == "uses kafka_settings but is not marked kafka", nodeid
    assert tier_problem(_shape("tests/faults/test_x.py::test_y", {"faults", "kafka"},
                               {"cluster", "fault_cluster"})) is None


def test_the_abuse_and_fault_suites_need_their_own_marker() -> None:
    problem = tier_problem(_shape("tests/abuse/test_x.py::test_y", {"slow"}))
    assert problem is not None and "abuse" in problem
    problem = tier_problem(_shape("tests/faults/test_x.py::test_y", {"kafka"}, {"kafka"}))
    assert problem is not None and "faults" in problem


def test_a_unit_test_may_be_slow_but_needs_no_broker_and_no_abuse_or_fault_marker() -> None:
    assert tier_problem(_shape("tests/unit/test_x.py::test_y")) is None
    assert tier_problem(_shape("tests/unit/test_x.py::test_y", {"slow"})) is None
    problem = tier_problem(_shape("tests/unit/test_x.py::test_y", {"kafka"}))
    assert problem is not None and "tests/integration" in problem


def test_problems_are_one_line_per_file_naming_its_first_offending_test() -> None:
    shapes = [_shape("tests/integration/test_b.py::test_1"),
              _shape("tests/integration/test_b.py::test_2"),
              _shape("tests/integration/test_a.py::test_1", {"kafka"}, {"kafka"}),
              _shape("tests/abuse/test_c.py::test_1", {"abuse"}, {"kafka"})]
    problems = tier_problems(shapes)
    assert [line.split(" ", 1)[0] for line in problems] == [
        "tests/abuse/test_c.py::test_1", "tests/integration/test_b.py::test_1"]

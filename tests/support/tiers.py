"""Which tier markers a test must carry, from where it lives and what it uses.

The fast tier is whatever carries no tier marker, so a test that needs a broker, a subprocess
or a browser and forgets its marker runs with the unit tests, and one that needs a broker and
is marked otherwise runs where no broker is promised. The suite refuses to collect either.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["BROKER_FIXTURES", "TIERS", "TestShape", "tier_problem", "tier_problems"]

TIERS = frozenset({"kafka", "slow", "abuse", "faults"})
# Fixtures that hand a test a running broker or cluster.
BROKER_FIXTURES = frozenset({"kafka", "kafka_settings", "cluster", "fault_cluster",
                             "outage_broker", "outage_broker_node"})
# Each suite directory under tests/ and the markers of which its tests carry at least one.
_SUITE_NEEDS = {
    "integration": frozenset({"kafka", "slow"}),
    "contracts": frozenset({"kafka", "slow"}),
    "abuse": frozenset({"abuse"}),
    "faults": frozenset({"faults"}),
}
_UNIT_REFUSED = frozenset({"kafka", "abuse", "faults"})  # a slow pure test is still a unit test


@dataclass(frozen=True)
class TestShape:
    """What the check needs of one collected test."""

    __test__ = False  # not a test class, despite its name

    nodeid: str  # tests/<suite>/test_x.py::test_y[...]
    markers: frozenset[str]
    fixtures: frozenset[str]

    @property
    def suite(self) -> str:
        parts = self.nodeid.split("::", 1)[0].split("/")
        return parts[1] if len(parts) > 2 and parts[0] == "tests" else ""


def tier_problem(test: TestShape) -> str | None:
    """Why this test's tier markers do not fit it; None when they do."""
    tiers = test.markers & TIERS
    brokers = sorted(test.fixtures & BROKER_FIXTURES)
    if brokers and "kafka" not in tiers:
        return f"uses {', '.join(brokers)} but is not marked kafka"
    if test.suite == "unit" and tiers & _UNIT_REFUSED:
        return (f"is a unit test marked {', '.join(sorted(tiers & _UNIT_REFUSED))}: "
                "move it to tests/integration")
    needs = _SUITE_NEEDS.get(test.suite)
    if needs is not None and not tiers & needs:
        return (f"lives in tests/{test.suite} but carries none of "
                f"{', '.join(sorted(needs))}, so it would run in the fast tier")
    return None


def tier_problems(tests: Iterable[TestShape]) -> list[str]:
    """One line per file (its first offending test), sorted: what the suite refuses."""
    by_file: dict[str, str] = {}
    for test in tests:
        problem = tier_problem(test)
        path = test.nodeid.split("::", 1)[0]
        if problem is not None and path not in by_file:
            by_file[path] = f"{test.nodeid} {problem}"
    return [by_file[path] for path in sorted(by_file)]

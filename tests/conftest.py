"""The suite's rules, applied to every run, and its shared fixtures.

The fixtures live in ``tests/support`` (``brokers``: the shared broker, the private broker and
the three-node cluster; ``models``: the models tests run; ``required``: what the machine must
give, skipped locally and failed under ``CI=true`` without it; ``figures_report``: the figures
tests print for the docs, shown at the end of the run). Here: every test's tier markers are
checked before ``-m`` selects any (``tests/support/tiers.py``), the tests of a private broker
are handed out before the rest, and a sandbox that cannot isolate fails the run under
``CI=true``.
"""

from __future__ import annotations

import os

import pytest

from tests.support.tiers import TestShape, tier_problems

pytest_plugins = [
    "tests.support.required", "tests.support.brokers", "tests.support.models",
    "tests.support.figures_report",
]


def pytest_configure(config: pytest.Config) -> None:
    """Where the kernel refuses the sandbox's namespaces, a developer's run allows an unisolated
    sandbox (its header says so) so that tests that only need to run code still run, and the
    tests of isolation itself skip; the fail-closed tests build their own refusing process.
    Under CI=true such a machine fails the run: it could not check the isolation."""
    from harness.tools.sandbox import ALLOW_UNISOLATED_ENV, isolation_problem

    problem = isolation_problem()
    if problem is None:
        return
    if os.environ.get("CI") == "true":
        raise pytest.UsageError(f"CI=true needs a sandbox that isolates, and this machine's "
                                f"kernel refuses it: {problem}")
    os.environ.setdefault(ALLOW_UNISOLATED_ENV, "1")


@pytest.hookimpl(tryfirst=True)  # before -m deselects (the fast tier's run checks them all)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Refuse a run in which a test's tier markers do not fit where it lives and what it uses
    (``tests/support/tiers.py``); put the tests of a private broker ahead of the rest."""
    problems = tier_problems(
        TestShape(item.nodeid, frozenset(mark.name for mark in item.iter_markers()),
                  frozenset(getattr(item, "fixturenames", ()))) for item in items)
    if problems:
        raise pytest.UsageError("test tier markers missing or wrong (pytestmark = "
                                "pytest.mark.kafka / slow / abuse / faults):\n  "
                                + "\n  ".join(problems))
    from tests.support.brokers import PRIVATE_BROKERS  # a plugin: imported once registered

    # They stop, kill and restart brokers for minutes each: handed out first, they run beside
    # the rest instead of starting late and running on alone at the end.
    private = {item.nodeid for item in items
               if set(PRIVATE_BROKERS) & set(getattr(item, "fixturenames", ()))}
    items.sort(key=lambda item: item.nodeid not in private)  # stable: otherwise as collected


def pytest_report_header(config: pytest.Config) -> str:
    from harness.tools.sandbox import isolation_problem

    problem = isolation_problem()
    if problem is None:
        return "sandbox: isolated (network, PID and mount namespaces)"
    return f"sandbox: UNISOLATED, allowed for this run because the kernel refuses it: {problem}"

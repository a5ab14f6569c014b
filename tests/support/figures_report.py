"""The figures tests print for the docs (a fault scenario's row, an abuse run's table, a fuzz
run's statuses): kept on the test's report and shown together at the end of the run, so they
are there also when pytest-xdist workers ran the tests (a worker's own output is not shown)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

__all__ = ["report_figures"]

_PROPERTY = "figures"


@pytest.fixture
def report_figures(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """Keep ``text`` to be shown under "figures" at the end of the run."""
    return lambda text: request.node.user_properties.append((_PROPERTY, text))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    shown = [(report.nodeid, text) for status in ("passed", "failed")
             for report in terminalreporter.getreports(status) if report.when == "call"
             for name, text in report.user_properties if name == _PROPERTY]
    if shown:
        terminalreporter.section("figures")
        for nodeid, text in shown:
            terminalreporter.write_line(f"{nodeid}\n{text}\n")

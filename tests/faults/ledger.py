"""How a fault scenario ends: the log checked against what was accepted, and one row of figures.

Every scenario counts what its clients were told was accepted, reads the log back once the
fault is over, and reports lost (accepted, not on the log), duplicated (copies beyond the
first) and unexpected (on the log, never accepted) records, with how long recovery took. The
rows are the table in docs/reliability.md.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import pytest

from infra.kafka_io import read_topic
from infra.settings import Settings

__all__ = ["FaultRow", "LogCheck", "check_log", "event_ids_on_log", "report"]


@dataclass(frozen=True)
class LogCheck:
    accepted: int
    on_log: int  # distinct ids
    lost: int
    duplicated: int
    unexpected: int


def check_log(accepted_ids: Iterable[str], logged: Counter[str]) -> LogCheck:
    accepted = set(accepted_ids)
    return LogCheck(
        accepted=len(accepted), on_log=len(logged), lost=len(accepted - set(logged)),
        duplicated=sum(n - 1 for n in logged.values()),
        unexpected=len(set(logged) - accepted))


def event_ids_on_log(settings: Settings) -> Counter[str]:
    """How often each event id is on ``events.raw``."""
    return Counter(json.loads(r.value)["event_id"] for r in read_topic(settings, "events.raw"))


@dataclass(frozen=True)
class FaultRow:
    fault: str
    command: str
    sent: int
    check: LogCheck
    recovery_s: float
    notes: str = ""

    def markdown(self) -> str:
        c = self.check
        return (f"| {self.fault} | `{self.command}` | {self.sent} | {c.accepted} | {c.on_log} | "
                f"{c.lost} | {c.duplicated} | {self.recovery_s:.1f} s | {self.notes} |")


def report(row: FaultRow, capsys: pytest.CaptureFixture[str]) -> None:
    """Print the row where the test output keeps it."""
    with capsys.disabled():
        print(f"\nfault | command | sent | accepted | on the log | lost | duplicated | "
              f"recovery | notes\n{row.markdown()}")

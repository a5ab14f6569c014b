"""How a fault scenario ends: the log checked against what was accepted, and one row of figures.

Every scenario counts what its clients were told was accepted, reads the log back once the
fault is over, and reports lost (accepted, not on the log), duplicated (copies beyond the
first) and unexpected (on the log, never accepted) records, with how long recovery took. The
rows are the table in docs/reliability.md.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from infra.kafka_io import read_topic
from infra.settings import Settings

__all__ = ["DELIVERY_STAMPS", "FaultRow", "LogCheck", "as_emitted", "check_log", "copies_on_log",
           "event_ids_on_log", "report"]

# What each delivery of an event sets anew: the SDK's send time, ingest's receipt time and what
# ingest derives from the two. Every other byte of a copy is the event as the client emitted it.
DELIVERY_STAMPS = ("sent_at", "received_at", "event_time", "clock_skew_ms")


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


def copies_on_log(settings: Settings) -> dict[str, list[bytes]]:
    """The records of each event id on ``events.raw`` that is there more than once."""
    copies: dict[str, list[bytes]] = {}
    for record in read_topic(settings, "events.raw"):
        copies.setdefault(json.loads(record.value)["event_id"], []).append(record.value)
    return {event_id: values for event_id, values in copies.items() if len(values) > 1}


def as_emitted(value: bytes) -> bytes:
    """A record of ``events.raw`` without its delivery stamps, in a canonical form: two copies
    of one event are equal here exactly when they carry the same event."""
    event = {k: v for k, v in json.loads(value).items() if k not in DELIVERY_STAMPS}
    return json.dumps(event, sort_keys=True, separators=(",", ":")).encode()


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


def report(row: FaultRow, report_figures: Callable[[str], None]) -> None:
    """Show the row at the end of the run (``tests/support/figures_report.py``)."""
    report_figures(f"fault | command | sent | accepted | on the log | lost | duplicated | "
                   f"recovery | notes\n{row.markdown()}")

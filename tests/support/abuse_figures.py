"""Per-class figures of an abuse run (requests, statuses, events), printed as a table that the
test output keeps."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

__all__ = ["BROKER_UP_ENV", "Figures"]

# Ingest under abuse, the broker up: a minute for Kafka's acknowledgement, which a broker that
# is up gives however busy the machine, so no answer may be a 5xx (not even 503).
BROKER_UP_ENV = {"REWARDSTREAM_INGEST_ACK_TIMEOUT_S": "60"}


@dataclass
class _Row:
    requests: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    accepted: int = 0
    rejected: Counter[str] = field(default_factory=Counter)


class Figures:
    def __init__(self, title: str) -> None:
        self.title = title
        self.rows: defaultdict[str, _Row] = defaultdict(_Row)

    def count(self, kind: str, status: int, accepted: int = 0,
              rejected: list[str] | None = None) -> None:
        row = self.rows[kind]
        row.requests += 1
        row.statuses[status] += 1
        row.accepted += accepted
        row.rejected.update(rejected or [])

    @property
    def requests(self) -> int:
        return sum(row.requests for row in self.rows.values())

    def statuses(self) -> Counter[int]:
        return sum((row.statuses for row in self.rows.values()), Counter())

    def table(self, notes: list[str]) -> str:
        lines = [self.title, f"{'class':44} {'requests':>8}  {'accepted':>8}  statuses; "
                             "events rejected by kind"]
        for kind, row in sorted(self.rows.items()):
            statuses = " ".join(f"{s}×{n}" for s, n in sorted(row.statuses.items()))
            rejected = " ".join(f"{k}×{n}" for k, n in row.rejected.most_common())
            lines.append(f"{kind:44} {row.requests:8d}  {row.accepted:8d}  {statuses}"
                         + (f"; {rejected}" if rejected else ""))
        total = " ".join(f"{s}×{n}" for s, n in sorted(self.statuses().items()))
        accepted = sum(row.accepted for row in self.rows.values())
        lines.append(f"{'all':44} {self.requests:8d}  {accepted:8d}  {total}")
        return "\n".join(lines + notes)

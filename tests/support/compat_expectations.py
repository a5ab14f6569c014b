"""What every client's run must show: the protocol held (every request answered 200 in
OpenAI's shape, each carrying the run's trace), the run is one trajectory on the log, its
events are those the docs promise, and the docs' table of features says what the client used.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from openai.types.chat import ChatCompletion

from tests.support.compat_agent_runs import AGENT_USER, AgentRun
from tests.support.compat_stack import CompatStack
from tests.support.service_keys import pseudonym

__all__ = ["DOCS", "check_run", "documented_features"]

DOCS = Path(__file__).resolve().parents[2] / "docs" / "gateway.md"
_TABLE_HEADING = "### Clients and what they use"


def documented_features() -> dict[str, set[str]]:
    """The gateway page's table of clients × features: {client: the features ticked}."""
    text = DOCS.read_text()
    blocks = text[text.index(_TABLE_HEADING):].split("\n\n")
    table = next(block for block in blocks if block.startswith("|"))
    rows = [[cell.strip() for cell in line.strip("|").split("|")]
            for line in table.splitlines() if line.startswith("|")]
    header, body = rows[0], rows[2:]
    names = [re.sub(r"`", "", name) for name in header[1:]]
    return {row[0].replace("`", ""): {name for name, cell in zip(names, row[1:], strict=True)
                                      if cell == "✓"} for row in body}


def check_run(stack: CompatStack, run: AgentRun, client: str, finishes: list[str],
              calls: list[str]) -> list[dict[str, Any]]:
    """Check the run (see the module); ``finishes``: each completion's finish reason in
    order, ``calls``: the tools the model called (each a valid ``tool.called`` from the
    spans). Returns the run's events."""
    wire = run.wire
    assert wire.statuses and set(wire.statuses) == {200}, wire.statuses
    for reply in wire.replies:
        ChatCompletion.model_validate(reply)
    trace = run.traceparent.split("-")[1]
    assert [tp.split("-")[1] if tp else None for tp in wire.traceparents] == \
        [trace] * len(wire.bodies)
    expected = len(finishes) + len(calls) + 1
    events = stack.events(run.trajectory_id, expected)
    served = [e["payload"] for e in events if e["type"] == "completion.served"]
    assert [p["finish_reason"] for p in served] == finishes
    assert len(served) == len(wire.bodies)  # every request of the run: this trajectory's
    called = [e["payload"] for e in events if e["type"] == "tool.called"]
    assert sorted(p["tool"] for p in called) == sorted(calls)
    assert all(p["valid"] for p in called), called
    ended = [e["payload"]["outcome"] for e in events if e["type"] == "trajectory.ended"]
    assert ended == ["completed"]  # the agent span's end: once, whatever the model calls
    assert len(events) == expected
    assert {e["user"] for e in events} == {pseudonym("org-test", AGENT_USER)}
    assert wire.features() == documented_features()[client]
    return events

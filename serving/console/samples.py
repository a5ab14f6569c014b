"""Sample trajectories behind an alert, as the console shows them (pure: no I/O).

An alert names an org (or the fleet, ``*``), a checkpoint and an arm (``*``: any) and an
event-time window: from the start of the metric window that opened it to the end of the latest
window its evidence came from. The trajectories behind it are the reward records of that org,
checkpoint and arm whose event time (``reward_event_time_ms``, the time the monitors window
them by) falls in it, and the events each record folded. Nothing of another org ever matches:
a record matches only under its own org, and an event only the record of its own org.

A page of them is the first ``limit`` matching records from where the last page stopped; the
cursor is where each ``rewards`` partition stopped, opaque to the page.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from schemas.alert_lifecycle import AlertRecord
from schemas.events import COMPLETION_SERVED, Event
from schemas.rewards import RewardRecord, trajectory_key
from schemas.samples import SampleRow, sample_rows
from streams.monitors.windows import ALL, reward_event_time_ms

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "SampleQuery", "TrajectoryKey", "decode_cursor",
           "encode_cursor", "query_for", "record_key_may_match", "reward_matches",
           "trajectory_view"]

DEFAULT_LIMIT = 10
MAX_LIMIT = 50
_EVENTS_SHOWN = 200  # per trajectory; the page says how many more there were
_TEXT_SHOWN_CHARS = 4000  # of one text field of an event
_TOKEN_IDS = ("prompt_token_ids", "completion_token_ids")
_MAX_CURSOR_CHARS = 8192
_NOT_A_CURSOR = "cursor: not one this console gave (pass the next value of a page)"
TrajectoryKey = tuple[str, str]  # (org or "", trajectory id), as trajectory_key composes them


@dataclass(frozen=True)
class SampleQuery:
    org: str  # "*": every org (a fleet alert, which only fleet staff see)
    checkpoint: str  # "*": every checkpoint
    arm: str  # "*": every arm
    since: datetime  # event time, inclusive
    until: datetime  # event time, exclusive
    limit: int = DEFAULT_LIMIT

    @property
    def since_ms(self) -> int:
        return int(self.since.timestamp() * 1000)

    @property
    def until_ms(self) -> int:
        return int(self.until.timestamp() * 1000)


def query_for(record: AlertRecord, window_s: float, limit: int = DEFAULT_LIMIT) -> SampleQuery:
    """The query of an alert's trajectories: its labels, and the windows from the one that
    opened it to the latest its evidence came from (windows are ``window_s`` long)."""
    labels = record.alert.labels
    since = (record.opened_window_end - timedelta(seconds=window_s)).astimezone(UTC)
    until = max(record.alert.window_end, record.opened_window_end).astimezone(UTC)
    return SampleQuery(org=labels.get("org", ALL), checkpoint=labels.get("checkpoint", ALL),
                       arm=labels.get("arm", ALL), since=since, until=until, limit=limit)


def record_key_may_match(key: bytes | None, query: SampleQuery) -> bool:
    """Whether a ``rewards`` record with this key can be of the query's org (read before the
    value is parsed; keys are ``org|trajectory|spec``)."""
    if query.org == ALL:
        return True
    return key is not None and key.startswith(trajectory_key(query.org, "").encode())


def reward_matches(record: RewardRecord, query: SampleQuery) -> bool:
    if query.org != ALL and record.org_id != query.org:
        return False
    if query.checkpoint != ALL and record.checkpoint_id != query.checkpoint:
        return False
    if query.arm != ALL and record.arm != query.arm:
        return False
    return query.since_ms <= reward_event_time_ms(record) < query.until_ms


def _iso_ms(time_ms: float) -> str:
    return datetime.fromtimestamp(time_ms / 1000, UTC).isoformat()


def _shown(payload: dict[str, Any]) -> dict[str, Any]:
    """An event's payload for the page: token ids as counts, without the logprobs, long text
    cut."""
    shown: dict[str, Any] = {}
    for name, value in payload.items():
        if name in _TOKEN_IDS:
            shown[name.removesuffix("_ids") + "_count"] = len(value)
        elif name == "behaviour_logprobs":
            continue  # one per completion token: their count is the completion's
        elif isinstance(value, str) and len(value) > _TEXT_SHOWN_CHARS:
            shown[name] = value[:_TEXT_SHOWN_CHARS]
            shown.setdefault("cut_to_chars", _TEXT_SHOWN_CHARS)
        else:
            shown[name] = value
    return shown


def _event_time(event: Event) -> datetime:
    return event.event_time or event.occurred_at


def _event_view(event: Event) -> dict[str, Any]:
    return {"event_id": str(event.event_id), "type": event.type,
            "event_time": _event_time(event).isoformat(), "producer": event.producer,
            "checkpoint": event.checkpoint_id, "arm": event.arm,
            "payload": _shown(event.payload.model_dump(mode="json"))}


def _sample_view(row: SampleRow) -> dict[str, Any]:
    """A completion as the record's samples view has it: its turn, text where the org allows
    it, its share of the reward and what users did with its work."""
    view = {"completion_id": row.completion_id, "turn": row.turn,
            "sampled_by": row.checkpoint_id, "producer": row.producer,
            "finish_reason": row.finish_reason, "credit": row.credit,
            "labels": row.labels.model_dump(mode="json") if row.labels else None,
            "tools_called": [call.model_dump(mode="json") for call in row.tools_called],
            "prompt_token_count": len(row.prompt_token_ids),
            "completion_token_count": len(row.completion_token_ids),
            "prompt_text": row.prompt, "completion_text": row.completion,
            "event_time": row.served_at.isoformat() if row.served_at else None}
    return {**_shown({k: v for k, v in view.items() if v is not None}), "in_sample": True}


def _completions(record: RewardRecord, events: list[Event]) -> list[dict[str, Any]]:
    """One row per completion: the record's samples view of it (``schemas.samples``) beside
    what its ``completion.served`` event says (model, latency); a completion the events show
    and the record holds no sample of (not served by the gateway) from its event alone."""
    served: dict[str, dict[str, Any]] = {}
    for event in events:
        if event.type == COMPLETION_SERVED:
            payload = _shown(event.payload.model_dump(mode="json"))
            served[payload["completion_id"]] = {"event_time": _event_time(event).isoformat(),
                                                **payload}
    rows = [{**served.pop(row.completion_id, {}), **_sample_view(row)}
            for row in sample_rows(record)]
    rows += served.values()
    return sorted(rows, key=lambda row: row.get("event_time") or "")


def trajectory_view(record: RewardRecord, events: list[Event]) -> dict[str, Any]:
    """A reward record and the events of it that were found, for the page."""
    ordered = sorted(events, key=_event_time)
    components = sorted(record.components.items(), key=lambda item: -abs(item[1]))
    return {
        "org": record.org_id, "trajectory_id": record.trajectory_id,
        "checkpoint": record.checkpoint_id, "arm": record.arm,
        "task_family": record.task_family, "outcome": record.outcome,
        "event_time": _iso_ms(reward_event_time_ms(record)),
        "reward": {"spec_version": record.spec_version, "total": record.total,
                   "components": dict(components), "signals": record.signals,
                   "finalized_by": record.finalized_by},
        "completions": _completions(record, ordered),
        "events": [_event_view(event) for event in ordered[:_EVENTS_SHOWN]],
        "events_folded": len(record.event_ids), "events_found": len(ordered),
    }


def encode_cursor(positions: dict[int, int]) -> str:
    """The next page's cursor: where each ``rewards`` partition goes on."""
    text = json.dumps({str(p): o for p, o in sorted(positions.items())}, separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> dict[int, int]:
    """A cursor back to positions; ValueError naming the problem for one this console did not
    give (it only says where to read: every record read is matched again)."""
    if len(cursor) > _MAX_CURSOR_CHARS:
        raise ValueError(f"cursor: longer than {_MAX_CURSOR_CHARS} characters")
    try:
        raw = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError):
        raise ValueError(_NOT_A_CURSOR) from None
    if not isinstance(raw, dict) or not all(
            isinstance(p, str) and p.isascii() and p.isdigit() and len(p) < 10
            and type(o) is int and 0 <= o < 2**63 for p, o in raw.items()):
        raise ValueError(_NOT_A_CURSOR)
    return {int(p): o for p, o in raw.items()}

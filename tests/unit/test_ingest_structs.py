"""Ingest judges an event read by the msgspec structs exactly as one read by the pydantic
models: the same verdict, the same stored bytes, the same rejection (kind, field, reason)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from functools import partial
from typing import Any

import pytest

from schemas.event_structs import decode_stored_event
from serving.ingest import verdicts
from serving.ingest.keys import ApiKey, hash_key, pseudonymise
from serving.ingest.verdicts import Accepted, EventRules, Verdict, judge_events
from serving.textpolicy import OrgText, TextPolicy
from streams.simlog import SimConfig, simulate_log
from tests.support.event_mutations import STRICTER, mutations

NOW = datetime(2026, 3, 1, 0, 0, 5, tzinfo=UTC)
PSEUDONYM = partial(pseudonymise, b"0123456789abcdef")
RULES = EventRules(text_policy=TextPolicy(patterns=(re.compile(r"sk-[a-z]+"),),
                                          orgs={"org-b": OrgText(capture=False)}))
KEYS = [ApiKey("all", hash_key("a"), "org-a", frozenset({"*", "completion.served"})),
        ApiKey("no-text", hash_key("b"), "org-b", frozenset({"*", "completion.served"})),
        ApiKey("client", hash_key("c"), "org-a", frozenset({"*"})),
        ApiKey("edits", hash_key("d"), "org-a", frozenset({"edit.decided", "edit.proposed"}))]
_INGEST_FIELDS = ("org_id", "producer", "received_at", "event_time", "clock_skew_ms")


def _client_events() -> list[dict[str, Any]]:
    """The simulated log's events as a client sends them, timed just before ``NOW``."""
    out = []
    for index, (_, raw) in enumerate(simulate_log(60, seed=3, config=SimConfig(texts=True))):
        event = {k: v for k, v in json.loads(raw).items() if k not in _INGEST_FIELDS}
        event["occurred_at"] = "2026-03-01T00:00:00.5+05:30" if index % 3 == 0 \
            else "2026-02-28T23:59:59.123456Z"
        event["sent_at"] = "2026-03-01T00:00:01Z"
        out.append(event)
    return out


CLIENT = _client_events()
SECRET = [json.dumps({**e, "payload": {**e["payload"], "prompt_text": "use sk-secret here"}})
          .encode() for e in CLIENT if e["type"] == "completion.served"][:3]


def _judged(raws: list[bytes], key: ApiKey, fast: bool) -> list[Verdict]:
    with pytest.MonkeyPatch.context() as patch:
        if not fast:
            patch.setattr(verdicts, "decode_stored_event", lambda _: None)
        return judge_events(raws, key, NOW, PSEUDONYM, RULES)


@pytest.mark.parametrize("key", KEYS, ids=[k.name for k in KEYS])
def test_the_simulated_events_are_judged_alike(key: ApiKey) -> None:
    raws = [json.dumps(e).encode() for e in CLIENT] + SECRET
    fast = _judged(raws, key, fast=True)
    assert fast == _judged(raws, key, fast=False)
    assert all(decode_stored_event(raw) is not None for raw in raws)
    stored = [v.stored for v in fast if isinstance(v, Accepted)]
    assert stored and all(b"sk-secret" not in s for s in stored)
    if "completion.served" in key.event_types:
        texts = [s for s in stored if b'"prompt_text":"' in s]
        assert bool(texts) == (key.org_id == "org-a")  # org-b captures no text
        assert any(b"use [redacted] here" in s for s in texts) == (key.org_id == "org-a")


def test_every_field_at_every_bound_is_judged_alike() -> None:
    cases = list(mutations(CLIENT))
    raws = [raw for _, raw in cases]
    fast = _judged(raws, KEYS[0], fast=True)
    models = _judged(raws, KEYS[0], fast=False)
    accepted_fast = 0
    for (where, raw), one, other in zip(cases, fast, models, strict=True):
        assert one == other, (where, raw[:300])
        if isinstance(one, Accepted):
            if decode_stored_event(raw) is not None:
                accepted_fast += 1
            else:
                assert where in STRICTER, where
    assert accepted_fast > 500

"""Sending one batch to ingest: gzip'd NDJSON, retried with backoff and jitter never sooner than
Retry-After within a budget, halved on 413, dropped (counted) on a 4xx that can never succeed or
when the budget is spent; a failed connection or a 5xx moves on to the next ingest replica."""

from __future__ import annotations

import gzip
import json
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from rewardstream_telemetry.retry import Action, backoff_delay_s, classify, parse_retry_after_s
from rewardstream_telemetry.throttle import ThrottledLog
from rewardstream_telemetry.transport import Request, Response, Transport

__all__ = ["Delivery", "RetryPolicy", "events_url"]

_log = logging.getLogger("rewardstream.sdk")


def events_url(base_url: str) -> str:
    base = base_url.rstrip("/")
    return base if base.endswith("/v1/events") else base + "/v1/events"


@dataclass(frozen=True)
class RetryPolicy:
    backoff_base_s: float
    backoff_cap_s: float
    max_attempts: int  # per batch
    budget_s: float  # per batch, from its first attempt


class Delivery:
    """Delivers batches over ``transport``; ``drop(counter, n)`` counts events given up and
    answers how many this client has dropped for that reason so far.

    The sender stops retrying once :attr:`deadline_s` (monotonic) has passed or ``abort`` is set:
    closing gives up for now and the events stay queued.
    """

    def __init__(self, urls: list[str], api_key: str, transport: Transport,
                 policy: RetryPolicy, gzip_level: int, abort: threading.Event,
                 drop: Callable[[str, int], int]) -> None:
        self._urls, self._endpoint = urls, 0  # the replica in use
        self._headers = {"Authorization": f"Bearer {api_key}",
                         "Content-Type": "application/x-ndjson", "Content-Encoding": "gzip"}
        self._transport, self._policy, self._gzip_level = transport, policy, gzip_level
        self._abort, self._drop = abort, drop
        self._throttled = ThrottledLog(_log)
        self.deadline_s = float("inf")
        self.counts = {"sent": 0, "duplicates": 0, "rejected": 0, "retries": 0, "failovers": 0}

    def _body(self, events: list[dict[str, Any]]) -> bytes:
        sent_at = datetime.now(timezone.utc).isoformat()
        stamped = [json.dumps({**event, "sent_at": sent_at}, separators=(",", ":")).encode()
                   for event in events]
        return gzip.compress(b"\n".join(stamped), compresslevel=self._gzip_level)

    def deliver(self, events: list[dict[str, Any]]) -> bool:
        """Send until the server takes responsibility, the events prove undeliverable or the
        retry budget is spent (all True); False only when closing gives up (events kept)."""
        attempts, started_s = 0, time.monotonic()
        policy = self._policy
        while time.monotonic() < self.deadline_s:
            retry_after_s, response = None, None
            request = Request(self._urls[self._endpoint], self._headers, self._body(events))
            attempts += 1
            try:
                response = self._transport(request)
            except Exception as exc:  # the network's errors, or anything a transport raises
                failure = f"send failed ({type(exc).__name__}: {exc})"
            else:
                failure = f"server answered {response.status}"
                action = classify(response.status)
                retry_after_s = parse_retry_after_s(response.headers.get("retry-after"))
                if action is Action.DONE:
                    self._record(response, len(events))
                    return True
                if action is Action.SPLIT and len(events) > 1:
                    half = len(events) // 2
                    return self.deliver(events[:half]) and self.deliver(events[half:])
                if action is not Action.RETRY:
                    return self.give_up("dropped_undeliverable", len(events),
                                        f"{failure}: {response.text[:300]}")
            delay_s = backoff_delay_s(attempts - 1, policy.backoff_base_s, policy.backoff_cap_s,
                                      retry_after_s, random.random())
            if attempts >= policy.max_attempts or \
                    time.monotonic() + delay_s - started_s > policy.budget_s:
                return self.give_up("dropped_gave_up", len(events), f"{failure}; retry budget "
                                    f"({policy.max_attempts} attempts, {policy.budget_s:g} s) "
                                    f"spent after {attempts} attempts")
            self.counts["retries"] += 1
            if len(self._urls) > 1 and (response is None or response.status >= 500):
                self._endpoint = (self._endpoint + 1) % len(self._urls)
                self.counts["failovers"] += 1
            self._throttled.log(logging.INFO, "retry", "telemetry: %s; retrying in %.1f s",
                                failure, delay_s)
            self._abort.wait(min(delay_s, max(0.0, self.deadline_s - time.monotonic())))
        return False

    def give_up(self, counter: str, events: int, why: str) -> bool:
        so_far = self._drop(counter, events)
        self._throttled.log(logging.WARNING, counter, "telemetry: %d events dropped (%s); %d "
                            "so far", events, why, so_far)
        return True

    def _record(self, response: Response, events: int) -> None:
        try:
            body = response.json()
            accepted, duplicates = len(body["accepted"]), len(body["duplicates"])
            reasons = [(r.get("event_id"), r.get("reason")) for r in body["rejected"]]
        except (ValueError, LookupError, TypeError, AttributeError):  # not ingest's answer
            if response.status >= 300:
                self.give_up("dropped_undeliverable", events,
                             f"server answered {response.status}: {response.text[:300]}")
            else:
                self.counts["sent"] += events  # taken, by the status; nothing more to know
            return
        self.counts["sent"] += accepted
        self.counts["duplicates"] += duplicates
        self.counts["rejected"] += len(reasons)
        for event_id, reason in reasons[:5]:
            _log.warning("telemetry event %s rejected: %s", event_id, reason)

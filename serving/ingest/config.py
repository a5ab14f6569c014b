"""The ingest service's configuration, from ``REWARDSTREAM_INGEST_*`` environment variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from serving.ingest.errors import IngestConfigError
from serving.ingest.keys import KeyRing, KeySource, load_keys, pseudonym_secret
from serving.ingest.limits import Caps
from serving.textpolicy import TextPolicy, load_text_policy

__all__ = ["IngestConfig", "load_ingest_config"]

_PREFIX = "REWARDSTREAM_INGEST_"
_MAX_WINDOW_S = 366 * 86_400.0  # a timestamp window wider than a year checks nothing useful


@dataclass(frozen=True)
class IngestConfig:
    keys: KeySource
    pseudonym_secret: bytes  # HMAC key for user pseudonyms; keep it stable, or joins break
    caps: Caps = field(default_factory=Caps)
    dedupe_window_s: float = 24 * 3600.0
    dedupe_max_entries: int = 1_000_000
    ack_timeout_s: float = 5.0  # how long a request waits for Kafka before answering 503
    unavailable_retry_after_s: int = 5
    max_future_s: float = 1.0  # event times later than receipt + this are clamped
    # occurred_at and sent_at must lie in [receipt - max age, receipt + max ahead]. The SDK keeps
    # unsent events on disk, so a laptop offline for weeks sends old events when it is back:
    # 30 days covers that (and a month-long vacation); older is a broken clock or a bug.
    # Ahead: a clock set to local time but labelled UTC is off by up to 14 hours.
    timestamp_max_age_s: float = 30 * 86_400.0
    timestamp_max_ahead_s: float = 86_400.0
    # The span attribute (e.g. gen_ai.conversation.id) whose value is an OTLP span's
    # trajectory; None: the trace is the trajectory (serving/ingest/otlp_mapping.py).
    otlp_trajectory_attribute: str | None = None
    # Which orgs' completion.served text is kept, and its redaction (REWARDSTREAM_TEXT_POLICY_FILE,
    # the gateway's too): a client cannot write text its org turned off.
    text_policy: TextPolicy = field(default_factory=TextPolicy)


def _number(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(_PREFIX + name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise IngestConfigError(f"{_PREFIX}{name}={raw!r} is not a number") from None
    if value <= 0:
        raise IngestConfigError(f"{_PREFIX}{name} must be positive, got {raw}")
    return value


def _at_most(env: Mapping[str, str], name: str, default: float, limit: float) -> float:
    value = _number(env, name, default)
    if value > limit:
        raise IngestConfigError(f"{_PREFIX}{name} must be at most {limit:g}, got {value:g}")
    return value


def load_ingest_config(env: Mapping[str, str] | None = None) -> IngestConfig:
    env = os.environ if env is None else env
    secret = pseudonym_secret(env)
    defaults = Caps()
    caps = Caps(
        max_event_bytes=int(_number(env, "MAX_EVENT_BYTES", defaults.max_event_bytes)),
        max_batch_bytes=int(_number(env, "MAX_BATCH_BYTES", defaults.max_batch_bytes)),
        max_batch_events=int(_number(env, "MAX_BATCH_EVENTS", defaults.max_batch_events)),
        # jiter, which validates events, stops at 200 levels whatever this says.
        max_json_depth=int(_at_most(env, "MAX_JSON_DEPTH", defaults.max_json_depth, 200)),
        max_compression_ratio=int(
            _number(env, "MAX_COMPRESSION_RATIO", defaults.max_compression_ratio)),
    )
    base = IngestConfig(keys=KeyRing([]), pseudonym_secret=b"")
    return IngestConfig(
        keys=load_keys(env, _PREFIX), pseudonym_secret=secret, caps=caps,
        dedupe_window_s=_number(env, "DEDUPE_WINDOW_S", base.dedupe_window_s),
        dedupe_max_entries=int(_number(env, "DEDUPE_MAX_ENTRIES", base.dedupe_max_entries)),
        ack_timeout_s=_number(env, "ACK_TIMEOUT_S", base.ack_timeout_s),
        unavailable_retry_after_s=int(
            _number(env, "UNAVAILABLE_RETRY_AFTER_S", base.unavailable_retry_after_s)),
        max_future_s=_number(env, "MAX_FUTURE_S", base.max_future_s),
        timestamp_max_age_s=_at_most(env, "TIMESTAMP_MAX_AGE_S", base.timestamp_max_age_s,
                                     _MAX_WINDOW_S),
        timestamp_max_ahead_s=_at_most(env, "TIMESTAMP_MAX_AHEAD_S", base.timestamp_max_ahead_s,
                                       _MAX_WINDOW_S),
        otlp_trajectory_attribute=env.get(_PREFIX + "OTLP_TRAJECTORY_ATTRIBUTE", "").strip()
        or None,
        text_policy=load_text_policy(env=env),
    )

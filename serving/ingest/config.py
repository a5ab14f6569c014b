"""The ingest service's configuration, from ``REWARDSTREAM_INGEST_*`` environment variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from serving.ingest.errors import IngestConfigError
from serving.ingest.keys import KeyRing
from serving.ingest.limits import Caps

__all__ = ["IngestConfig", "load_ingest_config"]

_PREFIX = "REWARDSTREAM_INGEST_"


@dataclass(frozen=True)
class IngestConfig:
    keys: KeyRing
    pseudonym_secret: bytes  # HMAC key for user pseudonyms; keep it stable, or joins break
    caps: Caps = field(default_factory=Caps)
    dedupe_window_s: float = 24 * 3600.0
    dedupe_max_entries: int = 1_000_000
    ack_timeout_s: float = 5.0  # how long a request waits for Kafka before answering 503
    unavailable_retry_after_s: int = 5
    max_future_s: float = 1.0  # event times later than receipt + this are clamped


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


def _keys(env: Mapping[str, str]) -> KeyRing:
    inline, path = env.get(_PREFIX + "KEYS"), env.get(_PREFIX + "KEYS_FILE")
    if inline:
        return KeyRing.from_json(inline, f"{_PREFIX}KEYS")
    if path:
        try:
            return KeyRing.from_json(Path(path).read_text(), path)
        except OSError as exc:
            raise IngestConfigError(f"cannot read {_PREFIX}KEYS_FILE={path}: {exc}") from None
    raise IngestConfigError(
        f"no API keys configured: set {_PREFIX}KEYS_FILE to a JSON key file (or {_PREFIX}KEYS to "
        "its contents); `rewardstream serve ingest-key --org ORG` makes a key and its entry"
    )


def load_ingest_config(env: Mapping[str, str] | None = None) -> IngestConfig:
    env = os.environ if env is None else env
    secret = env.get(_PREFIX + "PSEUDONYM_SECRET")
    if not secret or len(secret) < 16:
        raise IngestConfigError(
            f"{_PREFIX}PSEUDONYM_SECRET must be set to a secret of 16+ characters (the HMAC key "
            "that pseudonymises user ids); keep it stable across restarts"
        )
    defaults = Caps()
    caps = Caps(
        max_event_bytes=int(_number(env, "MAX_EVENT_BYTES", defaults.max_event_bytes)),
        max_batch_bytes=int(_number(env, "MAX_BATCH_BYTES", defaults.max_batch_bytes)),
        max_batch_events=int(_number(env, "MAX_BATCH_EVENTS", defaults.max_batch_events)),
    )
    base = IngestConfig(keys=KeyRing([]), pseudonym_secret=b"")
    return IngestConfig(
        keys=_keys(env), pseudonym_secret=secret.encode(), caps=caps,
        dedupe_window_s=_number(env, "DEDUPE_WINDOW_S", base.dedupe_window_s),
        dedupe_max_entries=int(_number(env, "DEDUPE_MAX_ENTRIES", base.dedupe_max_entries)),
        ack_timeout_s=_number(env, "ACK_TIMEOUT_S", base.ack_timeout_s),
        unavailable_retry_after_s=int(
            _number(env, "UNAVAILABLE_RETRY_AFTER_S", base.unavailable_retry_after_s)),
        max_future_s=_number(env, "MAX_FUTURE_S", base.max_future_s),
    )

"""API keys (stored as SHA-256 hashes) and keyed pseudonyms of user ids.

Keys are random 256-bit tokens, so a fast unsalted hash is enough to keep a leaked key file from
revealing them (a slow KDF protects low-entropy passwords, which these are not). A key file is a
JSON list of entries::

    [{"name": "ide-prod", "key_sha256": "<hex>", "org_id": "acme",
      "event_types": ["*"], "rate_per_s": 2000, "burst": 10000}]
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from schemas.events import EVENT_TYPES
from serving.ingest.errors import IngestConfigError

__all__ = ["ApiKey", "KeyRing", "hash_key", "new_key", "pseudonymise"]

_ALL_TYPES = "*"


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def new_key() -> str:
    """A fresh API key: ``rsk_`` and 43 URL-safe characters (256 random bits)."""
    return "rsk_" + secrets.token_urlsafe(32)


def pseudonymise(secret: bytes, org_id: str, user: str) -> str:
    """A stable per-org pseudonym for ``user``: HMAC-SHA256, so it cannot be reversed or
    recomputed without the secret, and the same user in two orgs gets unrelated pseudonyms."""
    digest = hmac.digest(secret, f"{org_id}\x00{user}".encode(), "sha256")
    return "u_" + digest[:16].hex()


@dataclass(frozen=True)
class ApiKey:
    name: str
    key_sha256: str
    org_id: str
    event_types: frozenset[str]
    rate_per_s: float = 2_000.0
    burst: float = 10_000.0

    def allows(self, event_type: str) -> bool:
        return _ALL_TYPES in self.event_types or event_type in self.event_types

    @classmethod
    def from_entry(cls, entry: Mapping[str, Any], position: int) -> ApiKey:
        where = f"API key entry {position}"
        try:
            types = frozenset(entry.get("event_types", [_ALL_TYPES]))
            unknown = types - set(EVENT_TYPES) - {_ALL_TYPES}
            if unknown:
                raise IngestConfigError(
                    f"{where}: event_types has unknown types {sorted(unknown)}; "
                    f"use '*' or some of {', '.join(EVENT_TYPES)}"
                )
            digest = str(entry["key_sha256"]).lower()
            if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
                raise IngestConfigError(
                    f"{where}: key_sha256 must be 64 hex digits (the sha256 of the key)")
            return cls(
                name=str(entry.get("name", f"key-{position}")), key_sha256=digest,
                org_id=str(entry["org_id"]), event_types=types,
                rate_per_s=float(entry.get("rate_per_s", cls.rate_per_s)),
                burst=float(entry.get("burst", cls.burst)),
            )
        except KeyError as exc:
            raise IngestConfigError(f"{where}: missing field {exc.args[0]!r}") from None
        except (TypeError, ValueError) as exc:
            raise IngestConfigError(f"{where}: {exc}") from None


class KeyRing:
    """The configured keys, looked up by the hash of the presented key."""

    def __init__(self, keys: Iterable[ApiKey]) -> None:
        self._by_hash = {key.key_sha256: key for key in keys}

    def __len__(self) -> int:
        return len(self._by_hash)

    def lookup(self, presented: str | None) -> ApiKey | None:
        if not presented:
            return None
        return self._by_hash.get(hash_key(presented))

    @classmethod
    def from_json(cls, text: str, source: str) -> KeyRing:
        try:
            entries = json.loads(text)
        except json.JSONDecodeError as exc:
            raise IngestConfigError(f"API keys in {source} are not valid JSON: {exc}") from None
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise IngestConfigError(f"API keys in {source} must be a JSON list of objects")
        return cls(ApiKey.from_entry(entry, i) for i, entry in enumerate(entries))

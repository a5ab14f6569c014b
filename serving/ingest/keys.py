"""API keys (stored as SHA-256 hashes), the key-file format every service reads, and keyed
pseudonyms of user ids.

Keys are random 256-bit tokens, so a fast unsalted hash is enough to keep a leaked key file from
revealing them (a slow KDF protects low-entropy passwords, which these are not). A key file is a
JSON list of entries; ``scope`` says which service accepts the key (``ingest`` when absent)::

    [{"name": "ide-prod", "key_sha256": "<hex>", "scope": "ingest", "org_id": "acme",
      "event_types": ["*"], "rate_per_s": 2000, "burst": 10000},
     {"name": "agent-prod", "key_sha256": "<hex>", "scope": "gateway", "org_id": "acme",
      "rate_per_s": 20, "burst": 100},
     {"name": "ana", "key_sha256": "<hex>", "scope": "console", "orgs": ["acme", "beta"]}]

``"*"`` in ``event_types`` means every event type a client may send; ``completion.served``,
whose behaviour logprobs the trainer divides by, is written by the platform's serving side and is
allowed only to a key that names it. ``"*"`` in a console key's ``orgs`` is the fleet view.
:class:`KeyFile` rereads its file when it changes, so a revoked key stops working without a
restart.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import secrets
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from schemas.bounds import USER_MAX_CHARS, control_character_problem, org_id_problem
from schemas.events import COMPLETION_SERVED, EVENT_TYPES
from serving.ingest.errors import KeyConfigError

__all__ = [
    "ALL", "CLIENT_EVENT_TYPES", "DEFAULT_RATES", "SERVING_EVENT_TYPES", "ApiKey", "KeyFile",
    "KeyRing", "KeyScope", "KeySource", "hash_key", "load_keys", "new_key", "presented_key",
    "pseudonym_secret", "pseudonymise",
]

log = logging.getLogger(__name__)

ALL = "*"
SERVING_EVENT_TYPES = frozenset({COMPLETION_SERVED})
CLIENT_EVENT_TYPES = tuple(t for t in EVENT_TYPES if t not in SERVING_EVENT_TYPES)
_MIN_SECRET_CHARS = 16


class KeyScope(StrEnum):
    """The service that accepts a key."""

    INGEST = "ingest"
    GATEWAY = "gateway"
    CONSOLE = "console"


# (rate_per_s, burst): events for ingest keys, requests for gateway keys.
DEFAULT_RATES = {KeyScope.INGEST: (2_000.0, 10_000.0), KeyScope.GATEWAY: (20.0, 100.0)}


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


def presented_key(headers: Mapping[str, str]) -> str | None:
    """The key of ``Authorization: Bearer <key>`` or ``X-Api-Key``; ``headers`` must be
    case-insensitive (Starlette's are) or use lower-case names."""
    auth = headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip()
    return headers.get("x-api-key")


@dataclass(frozen=True)
class ApiKey:
    name: str
    key_sha256: str
    org_id: str  # ingest and gateway keys: the org of everything sent with the key
    event_types: frozenset[str] = frozenset()  # ingest keys only
    rate_per_s: float = DEFAULT_RATES[KeyScope.INGEST][0]
    burst: float = DEFAULT_RATES[KeyScope.INGEST][1]
    scope: KeyScope = KeyScope.INGEST
    orgs: frozenset[str] = frozenset()  # console keys only: the orgs its holder sees
    # Ingest keys: the user of OTLP spans that name none (``user.id``, ``enduser.id``).
    default_user: str | None = None
    # Gateway keys: whether a request's W3C baggage may name its user (``user.id``).
    trust_baggage: bool = False

    def allows(self, event_type: str) -> bool:
        """Whether ingest accepts an event of this type sent with this key."""
        if self.scope is not KeyScope.INGEST:
            return False
        if event_type in self.event_types:
            return True
        return ALL in self.event_types and event_type not in SERVING_EVENT_TYPES

    def to_entry(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": self.name, "key_sha256": self.key_sha256,
                                 "scope": str(self.scope)}
        if self.scope is KeyScope.CONSOLE:
            return entry | {"orgs": sorted(self.orgs)}
        entry["org_id"] = self.org_id
        if self.scope is KeyScope.INGEST:
            entry["event_types"] = sorted(self.event_types)
        if self.default_user is not None:
            entry["default_user"] = self.default_user
        if self.trust_baggage:
            entry["trust_baggage"] = True
        return entry | {"rate_per_s": self.rate_per_s, "burst": self.burst}

    @classmethod
    def from_entry(cls, entry: Mapping[str, Any], position: int) -> ApiKey:
        where = f"API key entry {position}"
        try:
            raw_scope = entry.get("scope", KeyScope.INGEST)
            if not isinstance(raw_scope, str) or raw_scope not in set(KeyScope):
                raise KeyConfigError(f"{where}: scope {str(raw_scope)[:40]!r} is not one of "
                                     f"{', '.join(KeyScope)}")
            scope = KeyScope(raw_scope)
            digest = str(entry["key_sha256"]).lower()
            if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
                raise KeyConfigError(
                    f"{where}: key_sha256 must be 64 hex digits (the sha256 of the key)")
            name = str(entry.get("name", f"key-{position}"))
            if scope is KeyScope.CONSOLE:
                return cls(name=name, key_sha256=digest, org_id="", scope=scope,
                           orgs=_orgs(entry, where))
            if "event_types" in entry and scope is not KeyScope.INGEST:
                raise KeyConfigError(f"{where}: event_types is for ingest keys, not {scope}")
            rate, burst = DEFAULT_RATES[scope]
            org_id = str(entry["org_id"])
            if (problem := org_id_problem(org_id)) is not None:
                raise KeyConfigError(f"{where}: org_id: {problem}")
            return cls(
                name=name, key_sha256=digest, org_id=org_id,
                event_types=_event_types(entry, where) if scope is KeyScope.INGEST
                else frozenset(),
                rate_per_s=float(entry.get("rate_per_s", rate)),
                burst=float(entry.get("burst", burst)), scope=scope,
                default_user=_default_user(entry, scope, where),
                trust_baggage=_trust_baggage(entry, scope, where),
            )
        except KeyError as exc:
            raise KeyConfigError(f"{where}: missing field {exc.args[0]!r}") from None
        except (TypeError, ValueError) as exc:
            raise KeyConfigError(f"{where}: {exc}") from None


def _event_types(entry: Mapping[str, Any], where: str) -> frozenset[str]:
    types = frozenset(entry.get("event_types", [ALL]))
    unknown = types - set(EVENT_TYPES) - {ALL}
    if unknown:
        raise KeyConfigError(f"{where}: event_types has unknown types {sorted(unknown)}; "
                             f"use '*' or some of {', '.join(EVENT_TYPES)}")
    return types


def _default_user(entry: Mapping[str, Any], scope: KeyScope, where: str) -> str | None:
    user = entry.get("default_user")
    if user is None:
        return None
    if scope is not KeyScope.INGEST:
        raise KeyConfigError(f"{where}: default_user is for ingest keys, not {scope}")
    if not isinstance(user, str) or not 0 < len(user) <= USER_MAX_CHARS:
        raise KeyConfigError(f"{where}: default_user must be a string of 1 to "
                             f"{USER_MAX_CHARS} characters")
    if (problem := control_character_problem(user)) is not None:
        raise KeyConfigError(f"{where}: default_user {problem}")
    return user


def _trust_baggage(entry: Mapping[str, Any], scope: KeyScope, where: str) -> bool:
    trust = entry.get("trust_baggage", False)
    if not isinstance(trust, bool):
        raise KeyConfigError(f"{where}: trust_baggage must be true or false")
    if trust and scope is not KeyScope.GATEWAY:
        raise KeyConfigError(f"{where}: trust_baggage is for gateway keys, not {scope}")
    return trust


def _orgs(entry: Mapping[str, Any], where: str) -> frozenset[str]:
    orgs = entry["orgs"]
    if not isinstance(orgs, list) or not orgs or not all(isinstance(o, str) and o
                                                          for o in orgs):
        raise KeyConfigError(f"{where}: orgs must be a non-empty list of org ids, or ['*']")
    for org in orgs:
        if org != ALL and (problem := org_id_problem(org)) is not None:
            raise KeyConfigError(f"{where}: orgs: {problem}")
    return frozenset(orgs)


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

    def by_hash(self, key_sha256: str) -> ApiKey | None:
        """The key still configured under this hash (None once revoked)."""
        return self._by_hash.get(key_sha256)

    @classmethod
    def from_json(cls, text: str, source: str) -> KeyRing:
        try:
            entries = json.loads(text)
        except json.JSONDecodeError as exc:
            raise KeyConfigError(f"API keys in {source} are not valid JSON: {exc}") from None
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise KeyConfigError(f"API keys in {source} must be a JSON list of objects")
        return cls(ApiKey.from_entry(entry, i) for i, entry in enumerate(entries))


class KeyFile:
    """A key file, reread when it changes (checked at most every ``check_every_s``): a key
    added or revoked takes effect without a restart. A file that no longer parses keeps the
    keys read last, and says so in the log."""

    def __init__(self, path: Path, check_every_s: float = 1.0) -> None:
        self.path = path
        self._check_every_s = check_every_s
        self._stamp = self._stat()
        self._ring = self._read()
        self._next_check_s = time.monotonic() + check_every_s

    def __len__(self) -> int:
        return len(self._ring)

    def _stat(self) -> tuple[int, int]:
        try:
            stat = self.path.stat()
        except OSError as exc:
            raise KeyConfigError(f"cannot read the key file {self.path}: {exc}") from None
        return stat.st_mtime_ns, stat.st_size

    def _read(self) -> KeyRing:
        try:
            return KeyRing.from_json(self.path.read_text(), str(self.path))
        except OSError as exc:
            raise KeyConfigError(f"cannot read the key file {self.path}: {exc}") from None

    def lookup(self, presented: str | None) -> ApiKey | None:
        return self._current().lookup(presented)

    def by_hash(self, key_sha256: str) -> ApiKey | None:
        return self._current().by_hash(key_sha256)

    def _current(self) -> KeyRing:
        now_s = time.monotonic()
        if now_s >= self._next_check_s:
            self._next_check_s = now_s + self._check_every_s
            self._reload()
        return self._ring

    def _reload(self) -> None:
        try:
            stamp = self._stat()
            if stamp != self._stamp:
                self._ring, self._stamp = self._read(), stamp
                log.info("reread %d keys from %s", len(self._ring), self.path)
        except KeyConfigError as exc:
            log.error("keeping the keys read before: %s", exc)


KeySource = KeyRing | KeyFile


def load_keys(env: Mapping[str, str], prefix: str) -> KeySource:
    """The keys of ``{prefix}KEYS_FILE`` (a key file, reread when it changes) or ``{prefix}KEYS``
    (its contents inline)."""
    inline, path = env.get(prefix + "KEYS"), env.get(prefix + "KEYS_FILE")
    if inline:
        return KeyRing.from_json(inline, prefix + "KEYS")
    if path:
        return KeyFile(Path(path))
    raise KeyConfigError(
        f"no API keys configured: set {prefix}KEYS_FILE to a JSON key file (or {prefix}KEYS to "
        "its contents); `rewardstream keys create --for SERVICE --org ORG --file FILE` makes a "
        "key and adds its entry")


def pseudonym_secret(env: Mapping[str, str] | None = None) -> bytes:
    """``REWARDSTREAM_INGEST_PSEUDONYM_SECRET``: ingest and the gateway pseudonymise users with
    the same key, so their events about one user name the same pseudonym."""
    env = os.environ if env is None else env
    secret = env.get("REWARDSTREAM_INGEST_PSEUDONYM_SECRET")
    if not secret or len(secret) < _MIN_SECRET_CHARS:
        raise KeyConfigError(
            f"REWARDSTREAM_INGEST_PSEUDONYM_SECRET must be set to a secret of "
            f"{_MIN_SECRET_CHARS}+ characters (the HMAC key that pseudonymises user ids); keep "
            "it stable across restarts")
    return secret.encode()

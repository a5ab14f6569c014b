"""Staff keys: ``REWARDSTREAM_STAFF_KEYS="ana:key1,bob:key2"`` (name:key pairs).

Pages accept the key from the ``X-Staff-Key`` header or the ``rewardstream_staff_key`` cookie
(the page's key prompt sets it). Actions (POST) need the header, which a cross-site form cannot
send, so a stolen session cookie alone cannot act.
"""

from __future__ import annotations

import hmac
import os

from fastapi import HTTPException, Request

from serving.console.errors import ConsoleConfigError

__all__ = ["COOKIE", "HEADER", "StaffKeys", "parse_staff_keys"]

HEADER = "X-Staff-Key"
COOKIE = "rewardstream_staff_key"


def parse_staff_keys(raw: str) -> dict[str, str]:
    """``name:key,...`` → {key: name}."""
    keys: dict[str, str] = {}
    for pair in filter(None, (p.strip() for p in raw.split(","))):
        name, sep, key = pair.partition(":")
        if not sep or not name or len(key) < 8:
            raise ConsoleConfigError(
                "REWARDSTREAM_STAFF_KEYS: write name:key pairs separated by commas, keys of at "
                f"least 8 characters (got an entry starting {pair[:3]!r})")
        keys[key] = name
    if not keys:
        raise ConsoleConfigError(
            "REWARDSTREAM_STAFF_KEYS is empty: set name:key pairs so staff can sign in")
    return keys


class StaffKeys:
    def __init__(self, keys: dict[str, str]) -> None:
        self.keys = keys

    @classmethod
    def from_env(cls) -> StaffKeys:
        return cls(parse_staff_keys(os.environ.get("REWARDSTREAM_STAFF_KEYS", "")))

    def name_for(self, key: str | None) -> str | None:
        if not key:
            return None
        for known, name in self.keys.items():
            if hmac.compare_digest(known.encode(), key.encode()):
                return name
        return None

    def viewer(self, request: Request) -> str:
        """The staff member reading: 401 without a key, 403 with a wrong one."""
        key = request.headers.get(HEADER) or request.cookies.get(COOKIE)
        return self._check(key)

    def actor(self, request: Request) -> str:
        """The staff member acting: the key must come in the header."""
        return self._check(request.headers.get(HEADER))

    def _check(self, key: str | None) -> str:
        if not key:
            raise HTTPException(401, f"staff key required ({HEADER} header)")
        name = self.name_for(key)
        if name is None:
            raise HTTPException(403, "unknown staff key")
        return name

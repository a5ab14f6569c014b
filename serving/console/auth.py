"""Staff sign-in: a console key is exchanged for a server-side session.

Keys are key-file entries with ``"scope": "console"`` (``rewardstream keys create --for console
--name ana --org acme``), stored hashed, naming the staff member and the orgs they see.
``POST /api/session`` with a key sets the ``rewardstream_session`` cookie: a random 256-bit id,
HttpOnly (no script reads it), SameSite=Strict (no other site sends it), Secure when the console
is served over TLS or a trusted proxy says the client used https; the session, its expiry and
its CSRF token live in this process only. ``DELETE /api/session`` ends it. A session ends, too,
when its key is revoked from the key file.

Scripts may send the key itself in ``X-Staff-Key`` instead. Actions (POST) need that header, or
the session and its CSRF token in ``X-CSRF-Token``, which the page has and another site cannot
read. Wrong keys are limited per client address: after a burst of ten, one try per six seconds;
until then every sign-in from that address is answered 429 with ``Retry-After``, right key or not.
"""

from __future__ import annotations

import hmac
import math
import os
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from fastapi import HTTPException, Request, Response

from serving.console.errors import ConsoleConfigError
from serving.console.grants import Grant
from serving.ingest.keys import ApiKey, KeyScope, KeySource, hash_key, load_keys
from serving.ingest.limits import RateLimiter

__all__ = ["COOKIE", "CSRF_HEADER", "HEADER", "Session", "Staff", "StaffAuth", "client_address",
           "load_console_keys"]

HEADER = "X-Staff-Key"
CSRF_HEADER = "X-CSRF-Token"
COOKIE = "rewardstream_session"


def client_address(request: Request) -> str:
    """The client's address (a trusted proxy's X-Forwarded-For, as uvicorn resolves it)."""
    return request.client.host if request.client else "unknown"


def load_console_keys(env: Mapping[str, str] | None = None) -> KeySource:
    """``REWARDSTREAM_CONSOLE_KEYS_FILE`` (or ``_KEYS``, the file's contents)."""
    env = os.environ if env is None else env
    if env.get("REWARDSTREAM_STAFF_KEYS"):
        raise ConsoleConfigError(
            "REWARDSTREAM_STAFF_KEYS (staff keys in the clear) is no longer read: make hashed "
            "keys with `rewardstream keys create --for console --name NAME --org ORG|'*' --file "
            "staff-keys.json` and set REWARDSTREAM_CONSOLE_KEYS_FILE=staff-keys.json")
    return load_keys(env, "REWARDSTREAM_CONSOLE_")


@dataclass(frozen=True)
class Staff:
    name: str
    grant: Grant


@dataclass(frozen=True)
class Session:
    key_sha256: str  # the key it was opened with: revoking the key ends the session
    csrf_token: str
    expires_at_s: float  # on this process's monotonic clock


class StaffAuth:
    def __init__(self, keys: KeySource, session_ttl_s: float = 8 * 3600.0,
                 max_sessions: int = 10_000, wrong_keys_burst: float = 10.0,
                 wrong_keys_per_s: float = 1.0 / 6.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.keys = keys
        self._wrong_keys = (wrong_keys_per_s, wrong_keys_burst)
        self.session_ttl_s = session_ttl_s
        self._max_sessions = max_sessions
        self._clock = clock
        self._sessions: dict[str, Session] = {}  # by the hash of the session id
        self._lock = threading.Lock()  # routes run in a thread pool
        self._failures = RateLimiter()

    # --------------------------------------------------------------------- keys and sessions

    def _staff(self, key: ApiKey) -> Staff:
        return Staff(key.name, Grant(key.orgs))

    def check_key(self, presented: str, address: str) -> ApiKey:
        """The console key presented; 429 while the address is over its wrong-key budget,
        403 for a key that is not a console key (which spends that budget)."""
        now_s = self._clock()
        wait_s = self._failures.wait_s(address, 1.0, now_s)
        if wait_s > 0:
            raise HTTPException(429, "too many wrong staff keys from this address; try again "
                                "later", {"Retry-After": str(max(1, math.ceil(wait_s)))})
        key = self.keys.lookup(presented)
        if key is None or key.scope is not KeyScope.CONSOLE:
            self._failures.take(address, *self._wrong_keys, 1.0, now_s)
            raise HTTPException(403, "unknown staff key")
        return key

    def open_session(self, key: ApiKey, response: Response, secure: bool) -> Staff:
        now_s = self._clock()
        session_id = secrets.token_urlsafe(32)
        with self._lock:
            for sid, session in list(self._sessions.items()):
                if session.expires_at_s <= now_s:
                    del self._sessions[sid]
            while len(self._sessions) >= self._max_sessions:
                del self._sessions[next(iter(self._sessions))]  # the oldest
            self._sessions[hash_key(session_id)] = Session(
                key.key_sha256, secrets.token_urlsafe(32), now_s + self.session_ttl_s)
        response.set_cookie(COOKIE, session_id, max_age=int(self.session_ttl_s), path="/",
                            secure=secure, httponly=True, samesite="strict")
        return self._staff(key)

    def session(self, request: Request) -> tuple[Session, Staff] | None:
        """The request's live session and whose it is, if any."""
        session_id = request.cookies.get(COOKIE)
        if not session_id:
            return None
        sid = hash_key(session_id)
        session = self._sessions.get(sid)
        if session is None:
            return None
        key = self.keys.by_hash(session.key_sha256)
        if session.expires_at_s <= self._clock() or key is None:
            with self._lock:
                self._sessions.pop(sid, None)
            return None
        return session, self._staff(key)

    def close_session(self, request: Request, response: Response) -> None:
        session_id = request.cookies.get(COOKIE)
        if session_id:
            with self._lock:
                self._sessions.pop(hash_key(session_id), None)
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")

    # ------------------------------------------------------------------- route dependencies

    def _header_staff(self, request: Request) -> Staff | None:
        presented = request.headers.get(HEADER)
        if not presented:
            return None
        return self._staff(self.check_key(presented, client_address(request)))

    def _who(self, request: Request) -> tuple[Staff, Session | None]:
        staff = self._header_staff(request)
        if staff is not None:
            return staff, None
        found = self.session(request)
        if found is None:
            raise HTTPException(401, f"sign in (POST /api/session with your staff key) or send "
                                f"the {HEADER} header")
        session, staff = found
        return staff, session

    def viewer(self, request: Request) -> Staff:
        """The staff member reading: by key header or session; 401 with neither."""
        return self._who(request)[0]

    def actor(self, request: Request) -> Staff:
        """The staff member acting: by key header, or by session with its CSRF token."""
        staff, session = self._who(request)
        token = request.headers.get(CSRF_HEADER, "")
        if session is not None and not hmac.compare_digest(token.encode(),
                                                           session.csrf_token.encode()):
            raise HTTPException(403, f"actions in a session need its {CSRF_HEADER} header "
                                "(the console page sends it)")
        return staff

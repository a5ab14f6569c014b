"""Who calls the gateway: an API key from the gateway's key file names the org of everything the
request writes; each key has its own rate; users are pseudonymised exactly as ingest does it.

Keys are the key-file entries of ``serving/ingest/keys.py`` with ``"scope": "gateway"``
(``rewardstream keys create --for gateway``): 401 without a key or with an unknown one, 403 for
a key of another service, 429 with ``Retry-After`` over the key's rate (one token a request).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache, partial

from serving.gateway.errors import GatewayError
from serving.ingest.keys import (
    ApiKey,
    KeyScope,
    KeySource,
    load_keys,
    presented_key,
    pseudonym_secret,
    pseudonymise,
)
from serving.ingest.limits import RateLimiter

__all__ = ["AuthError", "GatewayAuth", "Gatekeeper", "load_gateway_auth"]

KEYS_PREFIX = "REWARDSTREAM_GATEWAY_"
_MIN_SECRET_BYTES = 16


class AuthError(GatewayError):
    """A request the gateway does not serve for who sent it (401, 403, 429)."""

    def __init__(self, message: str, status_code: int, retry_after_s: float = 0.0) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.retry_after_s = retry_after_s

    def headers(self) -> dict[str, str]:
        if self.status_code == 401:
            return {"WWW-Authenticate": "Bearer"}
        if self.status_code == 429:
            return {"Retry-After": str(max(1, math.ceil(self.retry_after_s)))}
        return {}


@dataclass(frozen=True)
class GatewayAuth:
    keys: KeySource
    # ingest's HMAC key for user ids: the gateway's events and the client's name the same user
    pseudonym_secret: bytes

    def __post_init__(self) -> None:
        if len(self.pseudonym_secret) < _MIN_SECRET_BYTES:
            raise GatewayError(f"the pseudonym secret must be at least {_MIN_SECRET_BYTES} "
                               "bytes (REWARDSTREAM_INGEST_PSEUDONYM_SECRET, as ingest's)")


def load_gateway_auth(env: Mapping[str, str] | None = None) -> GatewayAuth:
    """Keys from ``REWARDSTREAM_GATEWAY_KEYS_FILE`` (or ``_KEYS``), the secret from
    ``REWARDSTREAM_INGEST_PSEUDONYM_SECRET``."""
    env = os.environ if env is None else env
    return GatewayAuth(load_keys(env, KEYS_PREFIX), pseudonym_secret(env))


class Gatekeeper:
    def __init__(self, auth: GatewayAuth) -> None:
        self._keys = auth.keys
        self._limiter = RateLimiter()
        # The same users ask again and again; caching their pseudonyms saves an HMAC each.
        self.pseudonym: Callable[[str, str], str] = lru_cache(maxsize=65_536)(
            partial(pseudonymise, auth.pseudonym_secret))

    def admit(self, headers: Mapping[str, str], now_s: float) -> ApiKey:
        """The key a request came with, charged one request; raises :class:`AuthError`."""
        presented = presented_key(headers)
        if not presented:
            raise AuthError("missing API key: send `Authorization: Bearer <key>` (a gateway "
                            "key from `rewardstream keys create --for gateway`)", 401)
        key = self._keys.lookup(presented)
        if key is None:
            raise AuthError("unknown API key", 401)
        if key.scope is not KeyScope.GATEWAY:
            raise AuthError(f"API key {key.name!r} is for {key.scope}, not the gateway", 403)
        wait_s = self._limiter.take(key.key_sha256, key.rate_per_s, key.burst, 1.0, now_s)
        if wait_s > 0:
            raise AuthError(f"API key {key.name!r} is over its rate of {key.rate_per_s:g} "
                            "requests/s", 429, wait_s)
        return key

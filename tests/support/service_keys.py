"""Keys and the pseudonym secret of the services tests start: gateway keys and staff keys in the
key-file format the services read, as `rewardstream keys create` makes them."""

from __future__ import annotations

from collections.abc import Iterable

from serving.gateway.auth import GatewayAuth
from serving.ingest.keys import ALL, ApiKey, KeyRing, KeyScope, hash_key, pseudonymise

__all__ = ["GATEWAY_HEADERS", "GATEWAY_KEY", "PSEUDONYM_SECRET", "gateway_auth", "gateway_key",
           "pseudonym", "staff_keys"]

PSEUDONYM_SECRET = b"test-secret-0123456789"  # ingest_support's too: both name users alike
GATEWAY_KEY = "rsk_test-gateway-key"
GATEWAY_HEADERS = {"Authorization": f"Bearer {GATEWAY_KEY}"}


def pseudonym(org_id: str, user: str) -> str:
    """The pseudonym ingest and the gateway give ``user`` of ``org_id`` in the tests."""
    return pseudonymise(PSEUDONYM_SECRET, org_id, user)


def gateway_key(key: str, org_id: str = "org-test", rate_per_s: float = 1e6,
                burst: float = 1e6, name: str = "") -> ApiKey:
    return ApiKey(name or f"{org_id}-gateway", hash_key(key), org_id, rate_per_s=rate_per_s,
                  burst=burst, scope=KeyScope.GATEWAY)


def gateway_auth(*keys: ApiKey) -> GatewayAuth:
    """The gateway's auth with ``keys``, or with GATEWAY_KEY for org ``org-test``."""
    return GatewayAuth(KeyRing(keys or [gateway_key(GATEWAY_KEY)]), PSEUDONYM_SECRET)


def staff_keys(staff: dict[str, tuple[str, Iterable[str]]] | None = None) -> KeyRing:
    """Console keys: {key: (staff member, orgs)}; by default ana and bob, who see every org."""
    staff = staff or {"ana-secret-key": ("ana", [ALL]), "bob-secret-key": ("bob", [ALL])}
    return KeyRing(ApiKey(name, hash_key(key), "", scope=KeyScope.CONSOLE, orgs=frozenset(orgs))
                   for key, (name, orgs) in staff.items())

"""Who may call the gateway and what one request may ask: keys, scopes, rates and limits (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from serving.gateway.auth import AuthError, Gatekeeper, GatewayAuth
from serving.gateway.errors import GatewayError
from serving.gateway.request import RequestLimits, check_limits, check_prompt_tokens
from serving.ingest.keys import ApiKey, KeyRing, KeyScope, hash_key
from tests.support.service_keys import PSEUDONYM_SECRET, gateway_key, pseudonym

LIMITS = RequestLimits(max_prompt_chars=20, max_prompt_tokens=8, max_completion_tokens=16)


def _gatekeeper(*keys: ApiKey) -> Gatekeeper:
    return Gatekeeper(GatewayAuth(KeyRing(keys), PSEUDONYM_SECRET))


def _refusal(gatekeeper: Gatekeeper, headers: dict[str, str], now_s: float = 0.0) -> AuthError:
    with pytest.raises(AuthError) as info:
        gatekeeper.admit(headers, now_s)
    return info.value


def test_the_key_names_the_org_and_other_services_keys_are_forbidden() -> None:
    ingest = ApiKey("acme-ingest", hash_key("ingest-key"), "acme", frozenset({"*"}))
    gatekeeper = _gatekeeper(gateway_key("gk", org_id="acme"), ingest)
    assert gatekeeper.admit({"authorization": "Bearer gk"}, 0.0).org_id == "acme"
    missing = _refusal(gatekeeper, {})
    assert (missing.status_code, missing.headers()) == (401, {"WWW-Authenticate": "Bearer"})
    assert "Authorization: Bearer" in str(missing)
    assert _refusal(gatekeeper, {"authorization": "Bearer nope"}).status_code == 401
    wrong = _refusal(gatekeeper, {"x-api-key": "ingest-key"})
    assert wrong.status_code == 403 and "'acme-ingest' is for ingest, not the gateway" in str(wrong)


def test_each_key_has_its_own_rate_and_a_refusal_says_when_to_retry() -> None:
    gatekeeper = _gatekeeper(gateway_key("slow", org_id="a", rate_per_s=0.5, burst=2),
                             gateway_key("other", org_id="b", rate_per_s=0.5, burst=2))
    slow = {"authorization": "Bearer slow"}
    gatekeeper.admit(slow, 0.0)
    gatekeeper.admit(slow, 0.0)
    refused = _refusal(gatekeeper, slow, 0.1)
    assert refused.status_code == 429 and refused.headers() == {"Retry-After": "2"}
    assert "over its rate of 0.5 requests/s" in str(refused)
    gatekeeper.admit({"authorization": "Bearer other"}, 0.1)  # another key is not held up
    gatekeeper.admit(slow, 2.1)  # one token back after two seconds


def test_users_are_pseudonymised_per_org_as_ingest_does() -> None:
    gatekeeper = _gatekeeper()
    assert gatekeeper.pseudonym("acme", "bob") == pseudonym("acme", "bob")
    assert gatekeeper.pseudonym("acme", "bob") != gatekeeper.pseudonym("evil", "bob")
    with pytest.raises(GatewayError, match="at least 16 bytes"):
        GatewayAuth(KeyRing([]), b"short")


def _chat(content: Any, **fields: Any) -> dict[str, Any]:
    return {"messages": [{"role": "system", "content": "be brief"},
                         {"role": "user", "content": content}]} | fields


@pytest.mark.parametrize("kind, body, words", [
    ("chat", _chat("x", max_tokens=17), "max_tokens: 17 is over this gateway's limit of 16"),
    ("completion", {"prompt": "x", "max_completion_tokens": 99}, "max_completion_tokens: 99"),
    ("chat", _chat("y" * 13), "messages: the prompt has 21 characters, over this gateway's "
                              "limit of 20"),
    ("chat", _chat([{"type": "text", "text": "z" * 13}]), "messages: the prompt has 21"),
    ("completion", {"prompt": "p" * 21}, "prompt: the prompt has 21 characters"),
    ("completion", {"prompt": list(range(9))}, "prompt: the prompt is 9 tokens, over this "
                                               "gateway's limit of 8"),
])
def test_requests_over_the_limits_are_refused_naming_the_field(kind: str, body: dict[str, Any],
                                                               words: str) -> None:
    with pytest.raises(GatewayError) as info:
        check_limits(kind, body, LIMITS)  # type: ignore[arg-type]
    assert str(info.value).startswith(words), str(info.value)


def test_requests_at_the_limits_pass_and_tokens_are_checked_once_tokenised() -> None:
    check_limits("chat", _chat("y" * 12, max_tokens=16), LIMITS)
    check_limits("completion", {"prompt": list(range(8))}, LIMITS)
    check_prompt_tokens("chat", 8, LIMITS)
    with pytest.raises(GatewayError, match="^messages: the prompt is 9 tokens"):
        check_prompt_tokens("chat", 9, LIMITS)


@pytest.mark.parametrize("field, value", [("max_prompt_tokens", 70_000),
                                          ("max_completion_tokens", 0),
                                          ("max_prompt_chars", -1)])
def test_limits_beyond_what_completion_served_can_record_are_refused(field: str,
                                                                     value: int) -> None:
    with pytest.raises(GatewayError, match=field):
        RequestLimits(**{field: value})


def test_gateway_keys_come_from_the_scoped_entry() -> None:
    key = gateway_key("k", org_id="acme")
    assert key.scope is KeyScope.GATEWAY and ApiKey.from_entry(key.to_entry(), 0) == key

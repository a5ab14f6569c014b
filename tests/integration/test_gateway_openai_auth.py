"""The gateway over HTTP with the official openai client: no key, an unknown key or another
service's key is refused; the key names the org of every event the request writes (the same
trajectory id under two orgs is two trajectories), users are pseudonymised as ingest does;
requests over the limits are refused naming the field, and a key over its rate gets 429."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import openai
import pytest

from serving.engine.cli import build_engine_app
from serving.gateway.app import GatewayConfig, create_gateway_app
from serving.gateway.backend import BackendClient
from serving.gateway.request import RequestLimits
from serving.gateway.sinks import MemoryEventSink
from serving.ingest.keys import ApiKey, KeyScope, hash_key
from serving.local_server import serve_in_thread
from tests.support.service_keys import gateway_auth, gateway_key, pseudonym

pytestmark = pytest.mark.slow

KEYS = {"acme": "rsk_acme-gateway", "evil": "rsk_evil-gateway", "slow": "rsk_slow-gateway"}
INGEST_KEY = "rsk_acme-ingest"
UNCOMMON_TEXT = "".join(chr(97 + i * 7 % 26) for i in range(390))  # few merges: many tokens


@dataclass
class Gateway:
    url: str
    sink: MemoryEventSink

    def client(self, key: str) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=key, max_retries=0)


@pytest.fixture(scope="module")
def gateway(tiny_model_dir: Path) -> Iterator[Gateway]:
    auth = gateway_auth(
        gateway_key(KEYS["acme"], org_id="acme"), gateway_key(KEYS["evil"], org_id="evil"),
        gateway_key(KEYS["slow"], org_id="acme", rate_per_s=0.05, burst=1, name="slow"),
        ApiKey("acme-ingest", hash_key(INGEST_KEY), "acme", frozenset({"*"}),
               scope=KeyScope.INGEST))
    limits = RequestLimits(max_prompt_chars=400, max_prompt_tokens=64, max_completion_tokens=8)
    sink = MemoryEventSink()
    with serve_in_thread(build_engine_app(tiny_model_dir)) as engine:
        app = create_gateway_app(GatewayConfig(limits=limits), BackendClient(engine.url), sink,
                                 auth)
        with serve_in_thread(app) as server:
            yield Gateway(server.url, sink)


def _ask(client: openai.OpenAI, trajectory: str, user: str = "bob", **extra):
    return client.chat.completions.create(
        model="rewardstream", messages=[{"role": "user", "content": "fix the test"}],
        max_tokens=4, user=user, extra_headers={"X-Rewardstream-Trajectory-Id": trajectory},
        **extra)


def test_without_a_gateway_key_nothing_is_served(gateway: Gateway) -> None:
    with pytest.raises(openai.AuthenticationError, match="missing API key|unknown API key"):
        _ask(gateway.client("nothing"), "traj-x")
    response = httpx.post(f"{gateway.url}/v1/completions", json={"prompt": "x"})
    assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer"
    assert response.json()["error"]["type"] == "authentication_error"
    assert httpx.get(f"{gateway.url}/v1/models").status_code == 401
    with pytest.raises(openai.PermissionDeniedError, match="'acme-ingest' is for ingest"):
        _ask(gateway.client(INGEST_KEY), "traj-x")
    assert httpx.get(f"{gateway.url}/readyz").status_code == 200  # probes need no key
    assert gateway.client(KEYS["acme"]).models.list().data[0].id == "rewardstream"
    assert not [e for e in gateway.sink.events if e.trajectory_id == "traj-x"]


def test_the_key_names_the_org_so_a_trajectory_id_is_one_orgs(gateway: Gateway) -> None:
    _ask(gateway.client(KEYS["acme"]), "traj-shared")
    _ask(gateway.client(KEYS["evil"]), "traj-shared")  # evil names acme's trajectory id
    events = [e for e in gateway.sink.events if e.trajectory_id == "traj-shared"]
    by_org = {e.org_id: e for e in events}
    assert len(events) == 2 and set(by_org) == {"acme", "evil"}
    # ingest's pseudonyms: the same user in two orgs is two unrelated pseudonyms
    assert by_org["acme"].user == pseudonym("acme", "bob") != by_org["evil"].user
    assert by_org["evil"].user == pseudonym("evil", "bob")


@pytest.mark.parametrize("extra, field", [
    ({"max_tokens": 9}, "max_tokens: 9 is over this gateway's limit of 8"),
    ({"n": 2}, "n: "),
    ({"messages": [{"role": "user", "content": "x" * 401}]}, "messages: the prompt has 401 "
                                                             "characters"),
    ({"messages": [{"role": "user", "content": UNCOMMON_TEXT}]},
     "messages: the prompt is"),  # under 400 characters, over 64 tokens once tokenised
])
def test_requests_over_the_limits_get_400_naming_the_field(gateway: Gateway,
                                                           extra: dict, field: str) -> None:
    body = {"model": "rewardstream", "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 4} | extra
    client = gateway.client(KEYS["acme"])
    before = len(gateway.sink.events)
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(**body)
    assert info.value.body["message"].startswith(field), info.value.body  # type: ignore[index]
    assert len(gateway.sink.events) == before  # nothing was served, nothing is recorded


def test_a_key_over_its_rate_gets_429_with_retry_after(gateway: Gateway) -> None:
    client = gateway.client(KEYS["slow"])
    _ask(client, "traj-slow")
    with pytest.raises(openai.RateLimitError) as info:
        _ask(client, "traj-slow")
    assert int(info.value.response.headers["retry-after"]) >= 1
    assert "'slow' is over its rate" in str(info.value)
    _ask(gateway.client(KEYS["acme"]), "traj-not-slow")  # the org's other key is not held up

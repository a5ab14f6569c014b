"""The compatibility suite's stack, shared by the whole suite to keep it short: one gateway on
the torch engine serving the agent model (``tests/support/compat_agent_model.py``), one ingest
taking the agents' spans, the official OpenAI instrumentation exporting to it, on the suite's
own topics. Its helpers live in ``tests/support/compat_*.py``; only fixtures are here."""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import replace
from importlib import metadata, resources
from pathlib import Path

import pytest

from infra.settings import Settings, cache_dir
from infra.topics import create_topics
from serving.engine.cli import build_engine_app
from serving.gateway.app import GatewayConfig, create_gateway_app
from serving.gateway.backend import BackendClient
from serving.gateway.sinks import KafkaEventSink
from serving.local_server import serve_in_thread
from tests.support import compat_agent_model as agent_model
from tests.support.compat_agent_runs import instrumented
from tests.support.compat_stack import CompatStack
from tests.support.ingest_support import TEST_KEY, running_server
from tests.support.service_keys import GATEWAY_KEY, gateway_auth, gateway_key


def _client_prompts() -> list[str]:
    """The system prompts smolagents sends, so the model's tokenizer learns them."""
    prompts = resources.files("smolagents") / "prompts"
    return [p.read_text() for p in prompts.iterdir() if p.name.endswith(".yaml")]


@pytest.fixture(scope="session")
def agent_model_dir() -> Path:
    """The agent model, trained once (about a minute and a half here) into a cache outside the
    checkout, keyed by the code that makes it and the smolagents version whose prompts it
    learns; later runs reuse it."""
    from harness.policy import sft, tiny
    from tests.support import tool_model

    code = b"".join(Path(m.__file__).read_bytes() for m in (agent_model, tool_model, tiny, sft)
                    if m.__file__)
    key = hashlib.sha256(code + metadata.version("smolagents").encode()).hexdigest()[:12]
    out = cache_dir() / "models" / f"compat-agent-{key}"
    if not out.exists():  # renamed into place only once complete
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".compat-agent-", dir=out.parent))
        try:
            agent_model.build(staging, _client_prompts())
            try:
                staging.rename(out)
            except OSError:
                if not out.exists():  # else another test process built it first
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return out


@pytest.fixture(scope="session")
def compat_stack(kafka_settings: Settings, agent_model_dir: Path) -> Iterator[CompatStack]:
    settings = replace(kafka_settings, topic_prefix=f"compat{uuid.uuid4().hex[:8]}.")
    create_topics(settings)
    # The agents' user rides in their W3C baggage, which this key trusts.
    auth = gateway_auth(replace(gateway_key(GATEWAY_KEY), trust_baggage=True))
    with serve_in_thread(build_engine_app(agent_model_dir)) as engine:
        app = create_gateway_app(GatewayConfig(), BackendClient(engine.url),
                                 KafkaEventSink(settings), auth)
        with serve_in_thread(app) as gateway, running_server(settings) as ingest, \
                instrumented(ingest.url, TEST_KEY) as tracing:
            yield CompatStack(settings, f"{gateway.url}/v1", ingest.url, tracing)

"""The compatibility suite's stack, shared by the whole suite to keep it short: one gateway on
the torch engine serving the agent model (``agent_model.py``), one ingest taking the agents'
spans, the official OpenAI instrumentation exporting to it, on the suite's own topics."""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from importlib import metadata, resources
from pathlib import Path
from typing import Any

import pytest

from infra.kafka_io import read_topic
from infra.settings import Settings, cache_dir
from infra.topics import create_topics
from serving.engine.cli import build_engine_app
from serving.gateway.app import GatewayConfig, create_gateway_app
from serving.gateway.backend import BackendClient
from serving.gateway.sinks import KafkaEventSink
from serving.local_server import serve_in_thread
from tests.compat import agent_model
from tests.compat.agent_runs import AgentTracing, instrumented
from tests.support.ingest_support import TEST_KEY, running_server
from tests.support.service_keys import GATEWAY_KEY, gateway_auth, gateway_key


@dataclass
class CompatStack:
    settings: Settings
    gateway_url: str  # the OpenAI base URL: .../v1
    ingest_url: str
    tracing: AgentTracing

    def events(self, trajectory_id: str, expected: int,
               timeout_s: float = 60.0) -> list[dict[str, Any]]:
        """The events of one trajectory on ``events.raw``, once ``expected`` are there (or the
        time is up: the caller's assertion says what is missing)."""
        import json

        deadline = time.monotonic() + timeout_s
        while True:
            found = [json.loads(r.value) for r in read_topic(self.settings, "events.raw")]
            mine = [e for e in found if e["trajectory_id"] == trajectory_id]
            if len(mine) >= expected or time.monotonic() > deadline:
                return mine
            time.sleep(0.5)


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

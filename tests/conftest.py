"""Shared fixtures: the real local Kafka broker and per-test topic namespaces.

Tests that need Kafka take the ``kafka`` fixture. It uses the broker `rewardstream kafka start`
runs (starting it if needed). When no broker can be had the test is skipped locally, but under
``CI=true`` it fails: CI must never pass by skipping the integration tests.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import replace

import pytest

from infra import broker
from infra.settings import Settings, load_settings
from infra.topics import create_topics
from schemas.errors import RewardstreamError


@pytest.fixture(scope="session")
def kafka_settings() -> Settings:
    """Settings of a running broker; fails under CI=true, skips elsewhere, when there is none."""
    settings = load_settings()
    try:
        broker.start(settings)
    except RewardstreamError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"Kafka is required under CI=true but could not start: {exc}")
        pytest.skip(f"no Kafka broker: {exc}")
    return settings


@pytest.fixture
def kafka(kafka_settings: Settings) -> Iterator[Settings]:
    """Settings whose topic prefix is unique to this test, with every platform topic created."""
    settings = replace(kafka_settings, topic_prefix=f"t{uuid.uuid4().hex[:10]}.")
    create_topics(settings)
    yield settings


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory):
    """A tiny Llama-architecture causal LM and its tokenizer, built locally from a config."""
    from harness.policy.tiny import build_tiny_model, build_tokenizer

    corpus = [
        "def add(a, b):\n    return a + b\n",
        '<tool>read_file {"path": "src/app.py"}</tool>',
        '<tool>edit_file {"path": "src/app.py", "search": "a - b", "replace": "a + b"}</tool>',
        "The tests pass now. I kept the change small.",
    ] * 8
    tokenizer = build_tokenizer(corpus, vocab_size=300)
    return build_tiny_model(tokenizer, tmp_path_factory.mktemp("tiny-model"))

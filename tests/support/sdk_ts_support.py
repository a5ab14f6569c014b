"""Building the TypeScript SDK (``harness/sdk-ts``) and running its Node tests from pytest.

``npm ci`` installs its two build dependencies into ``harness/sdk-ts/node_modules`` (git-ignored)
only when ``package-lock.json`` changed since the last install; ``tsc`` compiles the package and
its tests into ``dist/``. Node 20+ and npm must be on PATH: without them the tests fail under
CI=true and are skipped elsewhere.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from infra.file_lock import exclusive
from infra.settings import cache_dir
from tests.support.cdp import require_binary
from tests.support.required import unavailable

__all__ = ["SDK_TS", "NodeRun", "build_sdk_ts", "node_test_command", "read_node_run", "run_node",
           "run_node_tests"]

SDK_TS = Path(__file__).resolve().parents[2] / "harness" / "sdk-ts"
_MIN_NODE_MAJOR = 20  # global fetch, CompressionStream and AbortSignal.any
_INSTALLED_STAMP = "node_modules/.rewardstream-installed-lock"


@dataclass(frozen=True)
class NodeRun:
    """A finished ``node --test`` run: its TAP summary counts and results by test name."""

    output: str
    counts: dict[str, int]
    results: dict[str, dict]


def _run(args: list[str], timeout_s: float, **kwargs: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(args, cwd=SDK_TS, capture_output=True, text=True, timeout=timeout_s,
                            **kwargs)  # type: ignore[call-overload]
    assert result.returncode == 0, f"{' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
    return result


def build_sdk_ts() -> str:
    """Install (when the lock changed) and compile the SDK; the path of ``node``."""
    node = require_binary("node")
    npm = require_binary("npm")
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    match = re.match(r"v(\d+)", version)
    major = int(match.group(1)) if match else 0
    if major < _MIN_NODE_MAJOR:
        unavailable(f"the TypeScript SDK needs Node {_MIN_NODE_MAJOR}+, found {version or 'none'}")
    lock_hash = hashlib.sha256((SDK_TS / "package-lock.json").read_bytes()).hexdigest()
    stamp = SDK_TS / _INSTALLED_STAMP
    # Parallel test processes of this checkout take turns: they install and compile in place.
    checkout = hashlib.sha256(str(SDK_TS).encode()).hexdigest()[:12]
    with exclusive(cache_dir() / "locks" / f"sdk-ts-build-{checkout}.lock"):
        if not stamp.exists() or stamp.read_text() != lock_hash:
            _run([npm, "ci", "--no-audit", "--no-fund", "--prefer-offline"], timeout_s=600)
            stamp.write_text(lock_hash)
        _run([node, "node_modules/typescript/bin/tsc", "-p", "."], timeout_s=300)
    return node


def run_node(node: str, script: str, *args: str, timeout_s: float = 120) -> str:
    """Run one compiled script (a path under ``dist/``); its stdout."""
    return _run([node, f"dist/{script}", *args], timeout_s=timeout_s).stdout


def node_test_command(node: str, files: list[str], test_timeout_s: float = 60) -> list[str]:
    """``node --test`` over compiled test files (paths under ``dist/``), reporting TAP; a test
    that hangs fails at ``test_timeout_s``, and handles a failed test left open do not keep its
    file running."""
    return [node, "--test", "--test-reporter=tap", "--test-force-exit",
            f"--test-timeout={int(test_timeout_s * 1000)}", *(f"dist/{file}" for file in files)]


def read_node_run(output: str, results_dir: Path | None) -> NodeRun:
    """The TAP summary of a finished run and the results its tests wrote to ``results_dir``."""
    counts = {name: int(n) for name, n in re.findall(r"^# (\w+) (\d+)$", output, re.MULTILINE)}
    results = {}
    if results_dir is not None:
        results = {path.stem: json.loads(path.read_text())
                   for path in sorted(results_dir.glob("*.json"))}
    return NodeRun(output, counts, results)


def run_node_tests(node: str, files: list[str], results_dir: Path | None = None,
                   env: dict[str, str] | None = None, timeout_s: float = 240) -> NodeRun:
    """Run Node tests to the end; fails with their output when any test fails."""
    result = subprocess.run(node_test_command(node, files), cwd=SDK_TS, capture_output=True,
                            text=True, timeout=timeout_s, env={**os.environ, **(env or {})})
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"node --test failed:\n{output}"
    return read_node_run(output, results_dir)

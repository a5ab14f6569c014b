"""Each SDK installs on its own, as a producer would install it, and delivers to a real ingest.

Python: the wheel of ``harness/sdk-py`` goes into a fresh virtualenv (offline, ``--no-index``),
which must then hold nothing but it besides pip and setuptools; the README's example runs there
against ``rewardstream serve ingest`` started with a key file. TypeScript: ``npm pack``'s tarball
goes into a fresh npm project (offline) and a script using ``@rewardstream/telemetry`` sends
through it. Both: the events are read back from ``events.raw``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from infra.settings import Settings
from serving.ingest.keys import hash_key
from serving.ingest.process import ingest_process
from tests.support.cdp import require_binary
from tests.support.ingest_support import TEST_KEY, read_topic
from tests.support.sdk_ts_support import SDK_TS, build_sdk_ts

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

SDK_PY = Path(__file__).resolve().parents[2] / "harness" / "sdk-py"
_INSTALLER = {"pip", "setuptools", "wheel"}  # what `python -m venv` itself puts there


def _run(args: list[str | Path], cwd: Path, timeout_s: float = 300,
         env: dict[str, str] | None = None) -> str:
    result = subprocess.run([str(arg) for arg in args], cwd=cwd, capture_output=True, text=True,
                            timeout=timeout_s, env=env)
    assert result.returncode == 0, f"{args} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def _key_file(path: Path) -> Path:
    """A key file as `rewardstream keys create --file` writes it: one key, every client type."""
    path.write_text(json.dumps([{"name": "producer", "key_sha256": hash_key(TEST_KEY),
                                 "org_id": "org-sdk", "event_types": ["*"],
                                 "rate_per_s": 1000.0, "burst": 1000.0}]))
    return path


def _distributions(python: Path) -> dict[str, str]:
    listed = json.loads(_run([python, "-m", "pip", "list", "--format", "json",
                              "--disable-pip-version-check"], python.parent))
    return {entry["name"].lower(): entry["version"] for entry in listed}


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment without anything that would let a child see the checkout's packages."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    return {**env, "PIP_NO_INDEX": "1", **extra}


def _readme_example() -> str:
    readme = (SDK_PY / "README.md").read_text()
    blocks = re.findall(r"^```python\n(.*?)^```", readme, re.MULTILINE | re.DOTALL)
    assert len(blocks) == 1, "the README should hold exactly one Python example"
    return blocks[0]


def test_python_sdk_installs_alone_and_its_readme_example_delivers(
        kafka: Settings, tmp_path: Path) -> None:
    source = tmp_path / "source"  # a copy: building writes build/ and egg-info beside it
    shutil.copytree(SDK_PY, source, ignore=shutil.ignore_patterns(
        "build", "*.egg-info", "__pycache__"))
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
          "--no-index", "--wheel-dir", tmp_path / "dist", source], tmp_path)
    [wheel] = (tmp_path / "dist").glob("rewardstream_telemetry-*.whl")
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", venv], tmp_path)
    python = venv / "bin" / "python"
    before = _distributions(python)
    _run([python, "-m", "pip", "install", "--no-index", "--disable-pip-version-check", wheel],
         tmp_path, env=_clean_env())
    added = {name for name in _distributions(python) if name not in before}
    others = sorted(set(_distributions(python)) - _INSTALLER)
    print(f"fresh virtualenv: installing the SDK added {sorted(added)}; distributions besides "
          f"pip/setuptools: {len(others)} ({', '.join(others)})")
    assert added == {"rewardstream-telemetry"} and others == ["rewardstream-telemetry"]
    assert not any(name.startswith("torch") for name in others)

    workdir = tmp_path / "producer"
    workdir.mkdir()
    (workdir / "example.py").write_text(_readme_example())
    with ingest_process(kafka, _key_file(tmp_path / "ingest-keys.json")) as server:
        ran = subprocess.run(
            [str(python), "-I", "example.py"], cwd=workdir, capture_output=True, text=True,
            timeout=120, env=_clean_env(REWARDSTREAM_INGEST_URL=server.url,
                                        REWARDSTREAM_INGEST_KEY=TEST_KEY))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.strip() == "delivered 4 events", ran.stdout
    records = [json.loads(r.value) for r in read_topic(kafka, "events.raw")]
    assert sorted(r["type"] for r in records) == ["edit.decided", "edit.proposed", "tool.called",
                                                   "trajectory.ended"]
    assert {(r["trajectory_id"], r["org_id"]) for r in records} == {("traj-1", "org-sdk")}


_TS_PRODUCER = """\
import { Telemetry } from "@rewardstream/telemetry";
import { FileStorage } from "@rewardstream/telemetry/node";

const [url, key, dir] = process.argv.slice(2);
const tel = new Telemetry(url, key, { storage: new FileStorage(dir) });
const traj = { trajectory_id: "traj-ts-pack", session_id: "session-1", user: "user-42",
               checkpoint_id: "ckpt-7" };
const ids = [
  tel.toolCalled(traj, { call_id: "c1", tool: "read_file", valid: true }),
  tel.editProposed(traj, { edit_id: "e1", path: "src/app.ts", lines_added: 3 }),
  tel.editDecided(traj, { edit_id: "e1", decision: "accepted" }, new Date().toISOString()),
  tel.trajectoryEnded(traj, { outcome: "completed", turns: 2 }),
];
const delivered = await tel.close(30_000);
console.log(JSON.stringify({ ids, delivered, stats: tel.stats() }));
"""


def test_typescript_sdk_installs_from_its_tarball_and_delivers(
        kafka: Settings, tmp_path: Path) -> None:
    node = build_sdk_ts()
    npm = require_binary("npm")
    [packed] = json.loads(_run([npm, "pack", "--json", "--pack-destination", tmp_path], SDK_TS))
    tarball = tmp_path / packed["filename"]
    app = tmp_path / "app"
    app.mkdir()
    (app / "package.json").write_text(json.dumps({"name": "producer", "private": True,
                                                  "type": "module"}))
    _run([npm, "install", "--offline", "--no-audit", "--no-fund", tarball], app)
    installed = sorted(path.name for path in (app / "node_modules").iterdir()
                       if not path.name.startswith("."))
    assert installed == ["@rewardstream"], installed  # no runtime dependencies came along
    (app / "producer.mjs").write_text(_TS_PRODUCER)
    with ingest_process(kafka, _key_file(tmp_path / "ingest-keys.json")) as server:
        out = json.loads(_run([node, "producer.mjs", server.url, TEST_KEY, tmp_path / "queue"],
                              app, timeout_s=120))
    assert out["delivered"] and out["stats"]["sent"] == 4, out
    on_log = {json.loads(r.value)["event_id"]: json.loads(r.value)
              for r in read_topic(kafka, "events.raw")}
    assert sorted(on_log) == sorted(out["ids"])
    assert {r["org_id"] for r in on_log.values()} == {"org-sdk"}
    print(f"typescript sdk from {tarball.name} ({packed['size']} bytes): {len(on_log)} events "
          "on events.raw")

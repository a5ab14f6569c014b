"""`rewardstream export` as its command line runs it, for the tests that export a range of the
test broker's log and read what it wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from infra.kafka_auth import client_env
from infra.settings import Settings

__all__ = ["cli_export"]


def cli_export(settings: Settings, org: str, out: Path, *options: str) -> dict[str, Any]:
    """Run ``rewardstream export --org ORG --out OUT OPTIONS`` against ``settings``' broker and
    topics; the manifest it wrote."""
    command = [str(Path(sys.executable).with_name("rewardstream")), "export", "--org", org,
               "--out", str(out), *options]
    done = subprocess.run(command, env={**os.environ, **client_env(settings)},
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert f"rows of org {org}" in done.stdout
    manifest: dict[str, Any] = json.loads((out / "manifest.json").read_text())
    return manifest

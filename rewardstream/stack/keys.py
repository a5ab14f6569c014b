"""The first keys of a deployment and its pseudonym secret, made once in the run directory.

Each key is written to a file of its own (readable by its owner only) whose path is printed:
the key itself is never printed. The services read the key files (hashes only), which every
later ``rewardstream keys create --file`` adds to. The pseudonym secret is made once and kept:
a new one would give every user a new pseudonym.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from infra.credentials import write_private
from rewardstream.stack.services import RunDir
from rewardstream.stack.settings import StackSettings
from serving.ingest.keys import ALL, KeyScope
from serving.keys_cli import DuplicateKeyName, add_key, make_key

__all__ = ["prepare_keys"]

_SECRET_ENV = "REWARDSTREAM_INGEST_PSEUDONYM_SECRET"


@dataclass(frozen=True)
class _FirstKey:
    scope: KeyScope
    env: str  # the variable its service reads the key file from
    name: Callable[[StackSettings], str]
    orgs: Callable[[StackSettings], list[str]]
    holder: Callable[[StackSettings], str]  # how the printed line names who holds it


_FIRST_KEYS = (
    _FirstKey(KeyScope.INGEST, "REWARDSTREAM_INGEST_KEYS_FILE",
              lambda s: f"{s['keys.org']}-ingest", lambda s: [s["keys.org"]],
              lambda s: f"your producers of org {s['keys.org']} (every client event type)"),
    _FirstKey(KeyScope.CONSOLE, "REWARDSTREAM_CONSOLE_KEYS_FILE", lambda s: s["keys.staff"],
              lambda _: [ALL], lambda s: f"staff member {s['keys.staff']} (every org)"),
    _FirstKey(KeyScope.GATEWAY, "REWARDSTREAM_GATEWAY_KEYS_FILE",
              lambda s: f"{s['keys.org']}-gateway", lambda s: [s["keys.org"]],
              lambda s: f"your agents' model requests, org {s['keys.org']}"),
)


def _first_key(first: _FirstKey, settings: StackSettings, run: RunDir) -> tuple[Path, bool]:
    """The key's file, made (with its entry in the service's key file) unless it exists."""
    key_path = run.keys / f"{first.scope}.key"
    if key_path.exists():
        return key_path, False
    run.keys.mkdir(mode=0o700, parents=True, exist_ok=True)  # before the key files in it
    name, attempt = first.name(settings), 1
    while True:  # a key file deleted by hand leaves its entry: the new key takes a new name
        label = name if attempt == 1 else f"{name}-{attempt}"
        key, entry = make_key(first.scope, first.orgs(settings), label, [], None, None)
        try:
            add_key(run.keys / f"{first.scope}-keys.json", entry)
            break
        except DuplicateKeyName:
            attempt += 1
    write_private(key_path, key + "\n")
    return key_path, True


def _pseudonym_secret(run: RunDir) -> tuple[str, Path | None, bool]:
    if os.environ.get(_SECRET_ENV):
        return os.environ[_SECRET_ENV], None, False
    path = run.secrets / "pseudonym.secret"
    made = not path.exists()
    if made:
        write_private(path, secrets.token_hex(32) + "\n")
    return path.read_text().strip(), path, made


def prepare_keys(settings: StackSettings, run: RunDir, gateway: bool,
                 say: Callable[[str], None]) -> dict[str, str]:
    """Make what is missing; say where each key is; the services' variables."""
    env: dict[str, str] = {}
    for first in _FIRST_KEYS:
        if first.scope is KeyScope.GATEWAY and not gateway:
            continue
        path, made = _first_key(first, settings, run)
        env[first.env] = str(run.keys / f"{first.scope}-keys.json")
        say(f"{first.scope} key for {first.holder(settings)}: {path}"
            f"{' (new)' if made else ''}")
    secret, secret_path, made = _pseudonym_secret(run)
    env[_SECRET_ENV] = secret
    say(f"pseudonym secret: {secret_path}{' (new)' if made else ''}" if secret_path is not None
        else f"pseudonym secret: from {_SECRET_ENV}")
    return env

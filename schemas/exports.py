"""The manifest of a dataset export (``rewardstream export``, ``streams/export.py``): its format
name, its id and the check that a file is one, shared by the export that writes it and by
``registry register --manifest``, which cites it as a checkpoint's lineage.

A manifest is a JSON object with ``format`` ``rewardstream.export/1`` and an ``export_id``: the
SHA-256 of the rest of it as canonical JSON (keys sorted, no spaces), so an edited manifest no
longer matches its id.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["MANIFEST_FORMAT", "manifest_id", "manifest_problem"]

MANIFEST_FORMAT = "rewardstream.export/1"


def manifest_id(manifest: Mapping[str, Any]) -> str:
    """The export id of ``manifest``: the SHA-256 of all but its ``export_id``, canonical."""
    rest = {key: value for key, value in manifest.items() if key != "export_id"}
    return hashlib.sha256(json.dumps(rest, sort_keys=True, separators=(",", ":"))
                          .encode()).hexdigest()


def manifest_problem(content: bytes) -> str | None:
    """Why ``content`` is not an export's manifest, or None when it is one."""
    try:
        manifest = json.loads(content)
    except ValueError as exc:  # UnicodeDecodeError included
        return f"not JSON ({exc})"
    if not isinstance(manifest, dict):
        return "not a JSON object"
    if manifest.get("format") != MANIFEST_FORMAT:
        return (f"format is {manifest.get('format')!r}, not {MANIFEST_FORMAT!r}: not the "
                "manifest.json of a `rewardstream export`")
    if manifest.get("export_id") != manifest_id(manifest):
        return "its export_id does not match its content: the manifest was edited"
    return None

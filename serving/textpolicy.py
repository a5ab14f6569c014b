"""What of an org's prompt and completion text is written, and the redaction run before it.

``completion.served`` may carry the prompt and the completion as text (``schemas.events``'s
``TEXT_FIELDS``). The gateway fills them and ingest accepts them from a key allowed to send
``completion.served``; both pass them through one :class:`TextPolicy` first, so nothing is
written (spool, topic, dead letter) before it ran:

- an org whose capture is off gets no text at all: the fields are left empty, and a dead-lettered
  event of that org loses them too (another org's are redacted there as anywhere);
- otherwise every redaction pattern replaces its matches with ``[redacted]``, then the hook (a
  callable ``(org_id, text) -> text``) runs; a hook that fails drops the text (never writes it
  unredacted);
- control characters other than tabs and line breaks become U+FFFD, and the text is cut to its
  bound: a prompt keeps its end (nearest the completion), a completion its start.

The settings file (TOML; ``REWARDSTREAM_TEXT_POLICY_FILE``, or the gateway's ``--text-policy``)::

    capture = true                        # orgs not named below (the default)
    redact = ['sk-[A-Za-z0-9]{20,}']      # regular expressions, for every org
    hook = "mypackage.scrub:scrub_text"   # optional, after the patterns

    [orgs.acme]
    capture = false                       # no text of acme is written anywhere

    [orgs.beta]
    redact = ['\\b\\d{3}-\\d{2}-\\d{4}\\b']   # beta's own patterns, after the shared ones
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.errors import ConfigError
from schemas import bounds as b
from schemas.events import TEXT_FIELDS

__all__ = ["POLICY_FILE_ENV", "REDACTED", "OrgText", "TextPolicy", "load_text_policy"]

log = logging.getLogger(__name__)

POLICY_FILE_ENV = "REWARDSTREAM_TEXT_POLICY_FILE"
REDACTED = "[redacted]"
_REPLACEMENT = "\ufffd"
TextHook = Callable[[str, str], str]


@dataclass(frozen=True)
class OrgText:
    """One org's own settings: whether its text is captured, and its own patterns."""

    capture: bool | None = None  # None: the policy's default
    patterns: tuple[re.Pattern[str], ...] = ()


@dataclass(frozen=True)
class TextPolicy:
    capture: bool = True  # for orgs without their own setting
    patterns: tuple[re.Pattern[str], ...] = ()
    hook: TextHook | None = None
    orgs: Mapping[str, OrgText] = field(default_factory=dict)

    def captures(self, org_id: str) -> bool:
        own = self.orgs.get(org_id)
        return self.capture if own is None or own.capture is None else own.capture

    def redact(self, org_id: str, text: str) -> str | None:
        """``text`` as it may be written for ``org_id`` (not yet cut to a bound); None when
        the org captures no text or the hook failed."""
        if not self.captures(org_id):
            return None
        for pattern in self._patterns(org_id):
            text = pattern.sub(REDACTED, text)
        if self.hook is not None:
            try:
                text = str(self.hook(org_id, text))
            except Exception as exc:  # noqa: BLE001 - a failing hook must cost the text only
                # The exception's message may quote the text: only its type is logged.
                log.warning("the text redaction hook failed (%s); the text is dropped",
                            type(exc).__name__)
                return None
        return b.TEXT_CONTROL.sub(_REPLACEMENT, text)

    def text_fields(self, org_id: str, prompt: str | None,
                    completion: str | None) -> dict[str, Any]:
        """The ``completion.served`` text fields for this prompt and completion: redacted,
        cut to their bounds, and whether either was cut."""
        prompt = self.redact(org_id, prompt) if prompt is not None else None
        completion = self.redact(org_id, completion) if completion is not None else None
        cut_prompt = _keep_end(prompt, b.PROMPT_TEXT_MAX_BYTES)
        cut_completion = _keep_start(completion, b.COMPLETION_TEXT_MAX_BYTES)
        return {"prompt_text": cut_prompt, "completion_text": cut_completion,
                "text_truncated": cut_prompt != prompt or cut_completion != completion}

    def stored_text(self, org_id: str, prompt: str | None, completion: str | None,
                    truncated: bool) -> dict[str, Any] | None:
        """The text fields a client's ``completion.served`` is stored with, or None when it
        sent no text (the payload is stored as it came)."""
        if prompt is None and completion is None:
            return None
        fields = self.text_fields(org_id, prompt, completion)
        fields["text_truncated"] = fields["text_truncated"] or truncated
        return fields

    def scrub_raw(self, org_id: str, raw: bytes) -> bytes:
        """A refused event's bytes as the dead-letter topic may keep them: its text fields left
        out (capture off) or redacted. A record that names no text field stays as it is; one
        that names them but is not a JSON object with a payload is kept empty (capture off) or
        with the patterns applied to all of it."""
        captures = self.captures(org_id)
        if (captures and not self._patterns(org_id) and self.hook is None) \
                or not any(name.encode() in raw for name in TEXT_FIELDS):
            return raw
        try:
            event = json.loads(raw)
        except ValueError:
            event = None
        payload = event.get("payload") if isinstance(event, dict) else None
        if not isinstance(payload, dict):
            if not captures:
                return b""
            text = raw.decode(errors="surrogateescape")
            for pattern in self._patterns(org_id):
                text = pattern.sub(REDACTED, text)
            return text.encode(errors="surrogateescape")
        for name in TEXT_FIELDS:
            value = payload.pop(name, None)
            if captures and isinstance(value, str):
                payload[name] = self.redact(org_id, value)
        return json.dumps(event).encode()

    def _patterns(self, org_id: str) -> tuple[re.Pattern[str], ...]:
        own = self.orgs.get(org_id)
        return self.patterns + (own.patterns if own is not None else ())


def _keep_end(text: str | None, max_bytes: int) -> str | None:
    if text is None or len(text) * 4 <= max_bytes:
        return text
    data = text.encode()
    return text if len(data) <= max_bytes else data[-max_bytes:].decode(errors="ignore")


def _keep_start(text: str | None, max_bytes: int) -> str | None:
    if text is None or len(text) * 4 <= max_bytes:
        return text
    data = text.encode()
    return text if len(data) <= max_bytes else data[:max_bytes].decode(errors="ignore")


def _patterns(value: Any, where: str) -> tuple[re.Pattern[str], ...]:
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise ConfigError(f"{where}: redact must be a list of regular expressions")
    compiled = []
    for pattern in value:
        try:
            compiled.append(re.compile(pattern))
        except re.error as exc:
            raise ConfigError(f"{where}: redact pattern {pattern!r} is not a regular "
                              f"expression: {exc}") from None
    return tuple(compiled)


def _hook(spec: Any, where: str) -> TextHook:
    module_name, _, name = str(spec).partition(":")
    try:
        hook = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(f"{where}: hook {spec!r} cannot be loaded (package.module:function): "
                          f"{exc}") from None
    if not callable(hook):
        raise ConfigError(f"{where}: hook {spec!r} is not callable")
    return hook


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: capture must be true or false")
    return value


def _org(org_id: str, value: Any, where: str) -> OrgText:
    if (problem := b.org_id_problem(org_id)) is not None:
        raise ConfigError(f"{where}: [orgs.{org_id}]: {problem}")
    if not isinstance(value, dict) or set(value) - {"capture", "redact"}:
        raise ConfigError(f"{where}: [orgs.{org_id}] may set capture and redact only")
    capture = _bool(value["capture"], f"{where} [orgs.{org_id}]") if "capture" in value else None
    return OrgText(capture, _patterns(value.get("redact", []), f"{where} [orgs.{org_id}]"))


def load_text_policy(path: Path | None = None,
                     env: Mapping[str, str] | None = None) -> TextPolicy:
    """The policy of ``path``, else of ``REWARDSTREAM_TEXT_POLICY_FILE``; without either,
    every org's text is captured unredacted."""
    env = os.environ if env is None else env
    if path is None and env.get(POLICY_FILE_ENV):
        path = Path(env[POLICY_FILE_ENV])
    if path is None:
        return TextPolicy()
    where = f"text policy {path}"
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    unknown = sorted(set(data) - {"capture", "redact", "hook", "orgs"})
    if unknown:
        raise ConfigError(f"{where}: unknown setting(s) {unknown}; known: capture, redact, "
                          "hook, orgs")
    orgs = data.get("orgs", {})
    if not isinstance(orgs, dict):
        raise ConfigError(f"{where}: orgs must be a table of [orgs.<org id>] sections")
    return TextPolicy(
        capture=_bool(data.get("capture", True), where),
        patterns=_patterns(data.get("redact", []), where),
        hook=_hook(data["hook"], where) if "hook" in data else None,
        orgs={org_id: _org(org_id, value, where) for org_id, value in orgs.items()})

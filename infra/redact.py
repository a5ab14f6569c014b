"""Secrets kept out of log lines and error messages.

Webhook URLs carry tokens in their paths and queries, URLs may carry passwords
(``https://user:pass@host``), API keys and bearer tokens travel in requests, and the pseudonym
secret and Kafka passwords sit in the environment. :func:`redact_url` and :func:`redact_text`
are for the messages the platform writes itself; :func:`install_log_redaction` (run by the CLI
for every command) rewrites every log record of the process as it is made, so a library's lines
(httpx logs each request's URL, uvicorn each path with its query) and exception tracebacks are
redacted too.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

__all__ = ["install_log_redaction", "redact_text", "redact_url", "register_secret"]

REDACTED = "[redacted]"
_MIN_SECRET_CHARS = 8  # shorter values would redact ordinary words
# a URL ends before trailing punctuation: "POST https://host/path: HTTP 500"
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]*[^\s'\"<>.,:;!?)\]]")
_BEARER = re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]+")
_API_KEY = re.compile(r"\brsk_[A-Za-z0-9_-]{8,}")
# Environment variables whose values are secrets (REWARDSTREAM_INGEST_PSEUDONYM_SECRET, a SASL
# password, the backend's API key...); *_FILE names hold paths, not secrets.
_SECRET_NAME = re.compile(r"SECRET|PASSWORD|PASSWD|TOKEN|API_KEY")
_secrets: set[str] = set()


def register_secret(value: str) -> None:
    """Redact ``value`` (and each part of a list of them) wherever it appears in a log line."""
    for part in {value, *re.split(r"[,;\s]+", value)}:
        if len(part) >= _MIN_SECRET_CHARS:
            _secrets.add(part)


def redact_url(url: str) -> str:
    """``scheme://host[:port]/…``: the path, query and any user or password dropped."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return REDACTED
    if not parts.scheme or not host:
        return REDACTED
    rest = "/…" if (parts.path not in ("", "/") or parts.query or parts.fragment) else ""
    return f"{parts.scheme}://{host}{port}{rest}"


def redact_text(text: str) -> str:
    """``text`` with URLs redacted, API keys and bearer tokens cut, registered secrets
    removed."""
    for secret in sorted(_secrets, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    text = _URL.sub(lambda m: redact_url(m.group(0)), text)
    text = _BEARER.sub(f"Bearer {REDACTED}", text)
    return _API_KEY.sub("rsk_" + REDACTED, text)


def _redact_access_line(record: logging.LogRecord) -> bool:
    """uvicorn's access lines keep their arguments (its formatter reads them): the path loses
    its query string. True when the record was one."""
    args = record.args
    if record.name != "uvicorn.access" or not isinstance(args, tuple) or len(args) < 3:
        return False
    path = str(args[2])
    record.args = (*args[:2], redact_text(path.split("?", 1)[0]) + ("?…" if "?" in path else ""),
                   *args[3:])
    return True


def _redacting_factory(previous: Any) -> Any:
    formatter = logging.Formatter()

    def make(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record: logging.LogRecord = previous(*args, **kwargs)
        try:
            if not _redact_access_line(record):
                # An empty tuple, not None: formatters that wrap args (faust's makes None
                # into (None,)) would otherwise format the finished message a second time.
                record.msg, record.args = redact_text(record.getMessage()), ()
            if record.exc_info and not record.exc_text:
                record.exc_text = redact_text(formatter.formatException(record.exc_info))
        except Exception:  # a record that cannot be formatted is logging's to report
            pass
        return record

    make.redacts = True  # type: ignore[attr-defined]
    return make


def install_log_redaction(env: Mapping[str, str] | None = None) -> None:
    """Redact every log record of this process from now on, and the values of secret
    environment variables wherever they appear. Calling it again changes nothing."""
    env = os.environ if env is None else env
    for name, value in env.items():
        if _SECRET_NAME.search(name) and not name.endswith("_FILE"):
            register_secret(value)
    factory = logging.getLogRecordFactory()
    if not getattr(factory, "redacts", False):
        logging.setLogRecordFactory(_redacting_factory(factory))

"""Secrets never reach log lines: a webhook URL's token while delivery fails against a real HTTP
server, httpx's and uvicorn's own lines, tracebacks, keys, and secrets from the environment."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from uvicorn.logging import AccessFormatter

from infra import redact
from infra.redact import install_log_redaction, redact_text, redact_url
from streams.monitors.delivery import post_with_retries

TOKEN = "T0KEN-abc123-SECRET"


@pytest.fixture
def redacting() -> Iterator[None]:
    """Redaction as the CLI installs it, undone after the test."""
    factory, secrets = logging.getLogRecordFactory(), set(redact._secrets)
    install_log_redaction({"REWARDSTREAM_INGEST_PSEUDONYM_SECRET": "pseudonym-secret-0123",
                           "REWARDSTREAM_KAFKA_SASL_PASSWORD": "sasl-pa55word!",
                           "REWARDSTREAM_INGEST_KEYS_FILE": "/etc/rewardstream/keys.json"})
    yield
    logging.setLogRecordFactory(factory)
    redact._secrets.clear()
    redact._secrets.update(secrets)


class _Failing(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(500)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def failing_webhook() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Failing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_failed_webhook_posts_are_logged_without_the_token(
        redacting: None, failing_webhook: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    url = f"{failing_webhook}/hooks/{TOKEN}?token={TOKEN}"
    refused = f"http://hooks.invalid/services/{TOKEN}"
    with httpx.Client(timeout=5) as client:
        assert not post_with_retries(client, url, {"a": 1}, attempts=2, backoff_s=0.01)
        assert not post_with_retries(client, refused, {"a": 1}, attempts=1)
    lines = [record.getMessage() for record in caplog.records]
    assert any("HTTP 500" in line for line in lines)  # the failures were logged ...
    assert any("httpx" == record.name for record in caplog.records)  # ... httpx's lines too
    assert TOKEN not in caplog.text and all(TOKEN not in line for line in lines)
    assert f"POST {failing_webhook}/…: HTTP 500 (attempt 1/2)" in lines  # the host stays


def test_library_lines_tracebacks_and_environment_secrets_are_redacted(
        redacting: None, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    log = logging.getLogger("rewardstream.test")
    log.info("connecting with %s", "sasl-pa55word!")
    log.warning("user id hashed with pseudonym-secret-0123 and key rsk_AbCdEf0123456789xyz")
    log.info("Authorization: Bearer abc.def-123")
    try:
        raise ValueError(f"could not reach https://user:pw@alerts.example/hook/{TOKEN}")
    except ValueError:
        log.exception("delivery failed")
    caplog.handler.format(caplog.records[-1])  # the traceback, as a handler writes it
    text = caplog.text + "".join(record.exc_text or "" for record in caplog.records)
    for secret in ("sasl-pa55word!", "pseudonym-secret-0123", "AbCdEf0123456789", "abc.def-123",
                   TOKEN, "user:pw"):
        assert secret not in text, secret
    assert "https://alerts.example/…" in text and "ValueError" in text
    assert "/etc/rewardstream/keys.json" not in redact._secrets  # a path is not a secret


def test_access_lines_lose_their_query_and_still_format(redacting: None) -> None:
    record = logging.getLogger("uvicorn.access").makeRecord(
        "uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "GET", f"/v1/models?api_key={TOKEN}", "1.1", 200), None)
    line = AccessFormatter("%(client_addr)s %(request_line)s %(status_code)s",
                           use_colors=False).format(record)
    assert line == '127.0.0.1:5000 GET /v1/models?… HTTP/1.1 200 OK'


def test_a_redacted_line_formats_once_under_faust_formatter(redacting: None) -> None:
    """faust's formatter (mode's) wraps a record's args in a tuple: a redacted record must not
    be formatted again, or every line of the monitors' worker turns into a logging error."""
    from mode.utils.logging import ExtensionFormatter

    record = logging.getLogger("aiokafka").makeRecord(
        "aiokafka", logging.ERROR, __file__, 1, "Group Coordinator Request failed: %s",
        ("[Error 15] CoordinatorNotAvailableError",), None)
    line = ExtensionFormatter(fmt="%(levelname)s %(message)s").format(record)
    assert line.strip() == ("ERROR Group Coordinator Request failed: [Error 15] "
                            "CoordinatorNotAvailableError")


@pytest.mark.parametrize("url, shown", [
    ("https://hooks.slack.com/services/T0/B0/XyZ", "https://hooks.slack.com/…"),
    ("https://user:secret@am.example:9093/api/v2/alerts", "https://am.example:9093/…"),
    ("http://127.0.0.1:9093", "http://127.0.0.1:9093"),
    ("http://[::1", "[redacted]"),
    ("not a url", "[redacted]"),
])
def test_urls_keep_only_scheme_host_and_port(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_text_keeps_what_is_not_secret() -> None:
    assert redact_text("kafka://127.0.0.1:19092 is up") == "kafka://127.0.0.1:19092 is up"
    assert redact_text("the basic setup") == "the basic setup"

"""The SDK's own HTTP transport (the standard library's http.client) against a loopback server:
keep-alive, a connection the server closed while idle, timeouts, and what the client sends."""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from rewardstream_telemetry import HttpTransport, Request, Telemetry, Trajectory


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    delay_s = 0.0
    hang_up_idle = False  # close each connection after answering, without saying so

    def __init__(self, port: int) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        # (client port, path, headers, body)
        self.requests: list[tuple[int, str, dict[str, str], bytes]] = []

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that timed out hung up before the answer: that is the test

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    server: _Server

    def do_POST(self) -> None:  # noqa: N802 (the handler's API)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.requests.append((self.client_address[1], self.path, dict(self.headers),
                                     body))
        time.sleep(self.server.delay_s)
        lines = gzip.decompress(body).splitlines() if body[:2] == b"\x1f\x8b" else []
        answer = json.dumps({"accepted": ["x"] * len(lines), "duplicates": [],
                             "rejected": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)
        self.close_connection = self.server.hang_up_idle

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def _serving(port: int = 0) -> Iterator[_Server]:
    server = _Server(port)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_requests_reuse_one_connection() -> None:
    transport = HttpTransport(timeout_s=5)
    with _serving() as server:
        answers = [transport(Request(f"{server.url}/v1/events?n={i}", {}, b"x"))
                   for i in range(5)]
    transport.close()
    assert [a.status for a in answers] == [200] * 5
    assert answers[0].headers["content-type"] == "application/json"
    assert len({port for port, *_ in server.requests}) == 1


def test_a_connection_the_server_closed_while_idle_is_replaced_without_an_error() -> None:
    transport = HttpTransport(timeout_s=5)
    with _serving() as server:
        server.hang_up_idle = True
        assert transport(Request(server.url, {}, b"first")).status == 200
        time.sleep(0.2)  # the server has closed the kept connection by now
        assert transport(Request(server.url, {}, b"second")).status == 200
    transport.close()
    assert [body for *_, body in server.requests] == [b"first", b"second"]  # each sent once
    assert len({port for port, *_ in server.requests}) == 2


def test_nothing_listening_and_a_slow_server_raise() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]
    transport = HttpTransport(timeout_s=0.3)
    with pytest.raises(ConnectionRefusedError):
        transport(Request(f"http://127.0.0.1:{closed_port}/v1/events", {}, b"x"))
    with _serving() as server:
        server.delay_s = 1.0
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            transport(Request(server.url, {}, b"x"))
        assert time.monotonic() - started < 0.9
    with pytest.raises(ValueError, match="not an http"):
        transport(Request("ftp://127.0.0.1/x", {}, b"x"))


def test_the_client_posts_gzipd_ndjson_with_its_key(tmp_path: Path) -> None:
    with _serving() as server:
        tel = Telemetry(server.url + "/", "rsk_secret", queue_dir=tmp_path, linger_s=10)
        trajectory = Trajectory("traj-h", "session-h", "user-h", "ckpt-h")
        ids = [str(tel.followup_sent(trajectory, sentiment="neutral")) for _ in range(3)]
        assert tel.close(timeout_s=10)
    [(_, path, headers, body)] = server.requests
    assert path == "/v1/events"
    assert headers["Authorization"] == "Bearer rsk_secret"
    assert headers["Content-Type"] == "application/x-ndjson"
    assert headers["Content-Encoding"] == "gzip"
    assert [json.loads(line)["event_id"] for line in gzip.decompress(body).splitlines()] == ids
    assert tel.stats().sent == 3

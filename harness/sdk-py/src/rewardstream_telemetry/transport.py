"""How a batch reaches ingest: one POST per call, over the standard library's ``http.client``.

A transport is any callable from a :class:`Request` to a :class:`Response`; raising means the
request failed before an answer (counted as a failed connection: retried, and the next replica
is tried). :class:`HttpTransport` is the default; tests and hosts with their own HTTP stack pass
theirs as ``Telemetry(..., transport=...)``.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

__all__ = ["HttpTransport", "Request", "Response", "Transport"]


@dataclass(frozen=True)
class Request:
    url: str
    headers: Mapping[str, str]
    body: bytes
    method: str = "POST"

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or ""


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)  # names kept in lower case

    def __post_init__(self) -> None:
        object.__setattr__(self, "headers",
                           {name.lower(): value for name, value in self.headers.items()})

    @classmethod
    def of_json(cls, status: int, value: Any, headers: Mapping[str, str] | None = None
                ) -> Response:
        """An answer with a JSON body (what ingest sends), for transports that stand in."""
        return cls(status, json.dumps(value).encode(),
                   {"content-type": "application/json", **(headers or {})})

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.body)


Transport = Callable[[Request], Response]

# A kept-alive connection the server closed while idle fails like this on its next request,
# before any answer: such a request is sent once more on a new connection.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


class HttpTransport:
    """HTTP/1.1 with keep-alive: one connection per origin, reused while it works.

    ``timeout_s`` bounds connecting and each read. Safe to call from one thread at a time per
    origin (the client's single sender thread); a lock makes concurrent use correct, not fast.
    """

    def __init__(self, timeout_s: float) -> None:
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._connections: dict[tuple[str, str], http.client.HTTPConnection] = {}

    def __call__(self, request: Request) -> Response:
        parts = urlsplit(request.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"not an http(s) URL: {request.url!r}")
        origin = (parts.scheme, parts.netloc)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        with self._lock:
            reused = origin in self._connections
            try:
                return self._send(origin, target, request)
            except _STALE:
                self._drop(origin)
                if not reused:
                    raise
            except BaseException:
                self._drop(origin)
                raise
            try:
                return self._send(origin, target, request)
            except BaseException:
                self._drop(origin)
                raise

    def _send(self, origin: tuple[str, str], target: str, request: Request) -> Response:
        connection = self._connections.get(origin)
        if connection is None:
            kind = http.client.HTTPSConnection if origin[0] == "https" else \
                http.client.HTTPConnection
            connection = kind(origin[1], timeout=self._timeout_s)
            self._connections[origin] = connection
        connection.request(request.method, target, body=request.body,
                           headers=dict(request.headers))
        answer = connection.getresponse()
        body = answer.read()
        if answer.will_close:
            self._drop(origin)
        return Response(answer.status, body, dict(answer.getheaders()))

    def _drop(self, origin: tuple[str, str]) -> None:
        connection = self._connections.pop(origin, None)
        if connection is not None:
            connection.close()

    def close(self) -> None:
        with self._lock:
            for origin in list(self._connections):
                self._drop(origin)

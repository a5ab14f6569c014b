"""``GET /metrics`` for every HTTP service: one registry in Prometheus' text format, and the
requests each service answered, by route and status."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)

__all__ = ["count_requests", "serve_metrics"]


def serve_metrics(app: FastAPI, registry: CollectorRegistry) -> None:
    """Add ``GET /metrics`` to ``app``, outside any credential check (scrapers hold none)."""

    @app.get("/metrics", summary="Prometheus metrics", response_class=Response)
    async def prometheus_metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)


def count_requests(app: FastAPI, registry: CollectorRegistry, service: str) -> None:
    """Count ``app``'s answers by route (its template, so ids in paths do not make new series)
    and status, and time them until the response starts."""
    requests = Counter("rewardstream_http_requests", "HTTP requests answered, by service, route "
                       "and status", ["service", "route", "status"], registry=registry)
    seconds = Histogram("rewardstream_http_request_duration_seconds", "Time from a request "
                        "until its response starts, by service and route", ["service", "route"],
                        buckets=(0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
                        registry=registry)

    @app.middleware("http")
    async def _count(request: Request,
                     call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        started_s = time.perf_counter()
        response = await call_next(request)
        matched = request.scope.get("route")
        route = getattr(matched, "path", "unmatched")
        requests.labels(service, route, str(response.status_code)).inc()
        seconds.labels(service, route).observe(time.perf_counter() - started_s)
        return response

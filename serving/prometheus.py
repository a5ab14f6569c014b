"""``GET /metrics`` for every service: one registry in Prometheus' text format."""

from __future__ import annotations

from fastapi import FastAPI, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

__all__ = ["serve_metrics"]


def serve_metrics(app: FastAPI, registry: CollectorRegistry) -> None:
    """Add ``GET /metrics`` to ``app``, outside any credential check (scrapers hold none)."""

    @app.get("/metrics", summary="Prometheus metrics", response_class=Response)
    async def prometheus_metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

"""The FastAPI app: routes are thin; :mod:`serving.ingest.service` does the work."""

from __future__ import annotations

import json
import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.openapi.utils import get_openapi
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from infra.settings import Settings
from schemas.topics import topic_name
from serving.ingest.config import IngestConfig
from serving.ingest.errors import IngestError
from serving.ingest.kafka_io import EventLog, read_recent_ids
from serving.ingest.metrics import IngestMetrics
from serving.ingest.models import IngestResult, Problem, event_schemas
from serving.ingest.service import IngestOutcome, IngestService, KafkaUnavailable, RateLimited

__all__ = ["create_app"]

_EVENTS_PATH = "/v1/events"


def _problem(status: int, detail: str, retry_after_s: float | None = None) -> Response:
    headers = {"Retry-After": str(max(1, math.ceil(retry_after_s)))} if retry_after_s else None
    return Response(json.dumps({"detail": detail}), status, headers,
                    media_type="application/json")


def _result(outcome: IngestOutcome) -> Response:
    body = {
        "accepted": outcome.accepted, "duplicates": outcome.duplicates,
        "rejected": [{"index": r.index, "event_id": r.event_id, "kind": r.kind,
                      "field": r.field, "reason": r.reason} for r in outcome.rejected],
    }
    return Response(json.dumps(body), outcome.status, media_type="application/json")


def _presented_key(request: Request) -> str | None:
    auth = request.headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip()
    return request.headers.get("x-api-key")


_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": IngestResult, "description": "Every event accepted (or a known duplicate)"},
    207: {"model": IngestResult, "description": "Some events rejected; see `rejected`"},
    400: {"model": Problem, "description": "The body is not a JSON array or NDJSON of objects"},
    401: {"model": Problem, "description": "Missing or unknown API key"},
    403: {"model": IngestResult,
          "description": "The key may send none of the batch's event types"},
    413: {"model": Problem, "description": "Over a batch cap after decompression; do not retry"},
    415: {"model": Problem, "description": "Content-Encoding is not identity, gzip or zstd"},
    429: {"model": Problem, "description": "The key is over its rate; retry after Retry-After",
          "headers": {"Retry-After": {"schema": {"type": "integer"}}}},
    503: {"model": Problem, "description": "Kafka unavailable; nothing was accepted; retry after "
          "Retry-After", "headers": {"Retry-After": {"schema": {"type": "integer"}}}},
}


def _openapi_document(app: FastAPI) -> dict[str, Any]:
    if app.openapi_schema:
        return app.openapi_schema
    document = get_openapi(title=app.title, version=app.version, description=app.description,
                           routes=app.routes)
    event_schema, defs = event_schemas()
    components = document.setdefault("components", {})
    components.setdefault("schemas", {}).update(defs)
    components["securitySchemes"] = {
        "bearer": {"type": "http", "scheme": "bearer", "description": "An ingest API key"}}
    operation = document["paths"][_EVENTS_PATH]["post"]
    operation["security"] = [{"bearer": []}]
    operation["requestBody"] = {"required": True, "content": {
        "application/json": {"schema": {"type": "array", "items": event_schema}},
        "application/x-ndjson": {"schema": {"type": "string",
                                            "description": "One event object per line"}},
    }}
    app.openapi_schema = document
    return document


def create_app(config: IngestConfig, settings: Settings) -> FastAPI:
    metrics = IngestMetrics()
    log = EventLog(settings.bootstrap_servers, topic_name(settings.topic_prefix, "events.raw"),
                   topic_name(settings.topic_prefix, "events.deadletter"))
    service = IngestService(config, log, metrics)
    state = {"ready": False}

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await log.start()
        since_ms = int((time.time() - config.dedupe_window_s) * 1000)
        service.remember(await read_recent_ids(
            settings.bootstrap_servers, log.raw_topic, await log.raw_partitions(), since_ms))
        state["ready"] = True
        try:
            yield
        finally:
            state["ready"] = False
            await log.stop()

    app = FastAPI(title="rewardstream ingest", version="1",
                  description="Telemetry events in, validated one by one, appended to events.raw.",
                  lifespan=lifespan)
    app.openapi = lambda: _openapi_document(app)  # type: ignore[method-assign]

    @app.post(_EVENTS_PATH, responses=_RESPONSES, response_model=None,
              summary="Append a batch of events (JSON array or NDJSON, optionally gzip/zstd)")
    async def post_events(request: Request) -> Response:
        started_s = time.perf_counter()
        response = await _handle(request)
        metrics.requests.labels(status=str(response.status_code)).inc()
        metrics.latency.observe(time.perf_counter() - started_s)
        return response

    async def _handle(request: Request) -> Response:
        key = config.keys.lookup(_presented_key(request))
        if key is None:
            return _problem(401, "missing or unknown API key: send `Authorization: Bearer <key>`")
        try:
            outcome = await service.ingest(key, await request.body(),
                                           request.headers.get("content-encoding"))
        except IngestError as exc:
            return _problem(exc.status, str(exc))
        except RateLimited as exc:
            return _problem(429, f"API key {key.name!r} is over its rate of {key.rate_per_s:g} "
                            "events/s", exc.retry_after_s)
        except KafkaUnavailable as exc:
            metrics.kafka_errors.inc()
            return _problem(503, f"Kafka is unavailable ({exc}); nothing was accepted",
                            config.unavailable_retry_after_s)
        return _result(outcome)

    @app.get("/livez", summary="Liveness: the process answers")
    async def livez() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", summary="Readiness: producer started and dedupe window rebuilt",
             responses={503: {"model": Problem}})
    async def readyz() -> Response:
        if not state["ready"]:
            return _problem(503, "starting: rebuilding the dedupe window from events.raw")
        return Response(json.dumps({"status": "ready"}), media_type="application/json")

    @app.get("/metrics", summary="Prometheus metrics", response_class=Response)
    async def prometheus_metrics() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return app

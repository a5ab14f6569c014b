"""The FastAPI app: routes are thin; :mod:`serving.ingest.service` does the work.

Every refusal is a 4xx naming what to fix; the one 5xx is 503 with ``Retry-After`` while Kafka
is unavailable. An exception nobody expected is answered 400 by a last-resort handler and
logged with its traceback: a 500 would make clients retry the same body for ever.

Ingest starts without Kafka: it connects (and rebuilds its dedupe window) in the background,
trying again with growing pauses, and answers 503 until then. ``/readyz`` is ready once it has
and while the brokers answer.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.openapi.utils import get_openapi

from infra.backoff import retry_pause_s
from infra.kafka_auth import python_client_options
from infra.kafka_health import KAFKA_UNAVAILABLE, BrokerWatch
from infra.settings import Settings
from schemas.topics import topic_name
from serving.ingest.config import IngestConfig
from serving.ingest.errors import IngestError
from serving.ingest.kafka_io import EventLog, read_recent_ids
from serving.ingest.keys import presented_key
from serving.ingest.metrics import IngestMetrics
from serving.ingest.models import IngestResult, Problem, event_schemas
from serving.ingest.otlp_route import add_traces_route
from serving.ingest.service import IngestOutcome, IngestService, KafkaUnavailable, RateLimited
from serving.prometheus import serve_metrics
from serving.request_body import BodyTooLarge, read_capped

__all__ = ["create_app"]

logger = logging.getLogger(__name__)  # not `log`: create_app's event log has that name
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


_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": IngestResult, "description": "Every event accepted (or a known duplicate)"},
    207: {"model": IngestResult, "description": "Some events rejected; see `rejected`"},
    400: {"model": Problem, "description": "The body is not a JSON array or NDJSON of objects "
          "(or could not be processed at all); do not resend it unchanged"},
    401: {"model": Problem, "description": "Missing or unknown API key"},
    403: {"model": IngestResult,
          "description": "The key may send none of the batch's event types"},
    413: {"model": Problem, "description": "Over a batch cap (bytes sent, bytes or events after "
          "decompression, compression ratio); send smaller batches"},
    415: {"model": Problem, "description": "Content-Encoding is not identity, gzip or zstd"},
    429: {"model": Problem, "description": "The key is over its rate; retry after Retry-After",
          "headers": {"Retry-After": {"schema": {"type": "integer"}}}},
    503: {"model": Problem, "description": "Kafka unavailable: nothing is accepted yet, though "
          "the batch may still be written once Kafka answers (the detail says which); resend "
          "it after Retry-After: events already written are answered as duplicates",
          "headers": {"Retry-After": {"schema": {"type": "integer"}}}},
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


async def _connect(log: EventLog, service: IngestService, connection: dict[str, Any],
                   dedupe_window_s: float) -> None:
    """Start the producer and rebuild the dedupe window, trying again until Kafka answers."""
    failures = 0
    while True:
        try:
            if not log.started:
                await log.start()
            since_ms = int((time.time() - dedupe_window_s) * 1000)
            service.remember(await read_recent_ids(
                connection, log.raw_topic, await log.raw_partitions(), since_ms))
            if failures:
                logger.warning("ingest reached Kafka after %d attempts; accepting events",
                               failures + 1)
            return
        except KAFKA_UNAVAILABLE as exc:
            failures += 1
            pause_s = retry_pause_s(failures, 0.5, 10.0)
            logger.warning("ingest cannot reach Kafka yet (%s: %s); trying again in %.1f s, "
                           "answering 503 meanwhile", type(exc).__name__, exc, pause_s)
            await asyncio.sleep(pause_s)


def create_app(config: IngestConfig, settings: Settings) -> FastAPI:
    watch = BrokerWatch(settings, "ingest")
    metrics = IngestMetrics(watch)
    connection = python_client_options(settings)
    log = EventLog(connection, topic_name(settings.topic_prefix, "events.raw"),
                   topic_name(settings.topic_prefix, "events.deadletter"),
                   on_replaced=metrics.producer_replacements.inc)
    service = IngestService(config, log, metrics)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        watch.start()
        connecting = asyncio.ensure_future(
            _connect(log, service, connection, config.dedupe_window_s))
        try:
            yield
        finally:
            connecting.cancel()
            watch.stop()
            await log.stop()

    app = FastAPI(title="rewardstream ingest", version="1",
                  description="Telemetry events in, validated one by one, appended to events.raw.",
                  lifespan=lifespan)
    app.openapi = lambda: _openapi_document(app)  # type: ignore[method-assign]

    @app.exception_handler(Exception)
    async def last_resort(request: Request, exc: Exception) -> Response:
        logger.error("unexpected %s on %s %s", type(exc).__name__, request.method,
                     request.url.path, exc_info=exc)
        metrics.unexpected_errors.inc()
        metrics.requests.labels(status="400").inc()
        return _problem(400, f"ingest could not process this request ({type(exc).__name__}); "
                        "the error is logged; resending the same body will fail the same way")

    @app.post(_EVENTS_PATH, responses=_RESPONSES, response_model=None,
              summary="Append a batch of events (JSON array or NDJSON, optionally gzip/zstd)")
    async def post_events(request: Request) -> Response:
        started_s = time.perf_counter()
        response = await _handle(request)
        metrics.requests.labels(status=str(response.status_code)).inc()
        metrics.latency.observe(time.perf_counter() - started_s)
        return response

    async def _handle(request: Request) -> Response:
        key = config.keys.lookup(presented_key(request.headers))
        if key is None:
            return _problem(401, "missing or unknown API key: send `Authorization: Bearer <key>`")
        try:
            body = await read_capped(request.stream(), request.headers.get("content-length"),
                                     config.caps.max_batch_bytes)
            outcome = await service.ingest(key, body, request.headers.get("content-encoding"))
        except RateLimited as exc:
            return _problem(exc.status_code, f"API key {key.name!r} is over its rate of "
                            f"{key.rate_per_s:g} events/s", exc.retry_after_s)
        except KafkaUnavailable as exc:
            metrics.kafka_errors.inc()
            return _problem(exc.status_code, exc.answer(), config.unavailable_retry_after_s)
        except (IngestError, BodyTooLarge) as exc:
            return _problem(exc.status_code, str(exc))
        return _result(outcome)

    add_traces_route(app, service, metrics,
                     lambda request: config.keys.lookup(presented_key(request.headers)))

    @app.get("/livez", summary="Liveness: the process answers")
    async def livez() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", summary="Readiness: connected to Kafka (producer started, dedupe window "
             "rebuilt) and the brokers answer", responses={503: {"model": Problem}})
    async def readyz() -> Response:
        # Not ready is a 503 like any other here: with Retry-After, when to ask again.
        if not service.accepting:
            return _problem(503, "starting: connecting to Kafka and rebuilding the dedupe "
                            "window from events.raw", config.unavailable_retry_after_s)
        if not watch.up:
            return _problem(503, f"Kafka does not answer: {watch.reason}",
                            config.unavailable_retry_after_s)
        return Response(json.dumps({"status": "ready"}), media_type="application/json")

    serve_metrics(app, metrics.registry)

    return app

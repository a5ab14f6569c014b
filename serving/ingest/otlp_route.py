"""``POST /v1/traces``: OTLP/HTTP spans in; the events they map to are judged, appended and
dead-lettered exactly as ``POST /v1/events`` does it (one :class:`IngestService`).

Answers follow the OTLP/HTTP specification: 200 with an ``ExportTraceServiceResponse`` (its
``partial_success`` counts and explains rejected spans), else a ``google.rpc.Status`` with the
HTTP status, in the request's encoding. 429 and 503 carry ``Retry-After``, which OpenTelemetry
exporters honour; 503 (Kafka unavailable) is the only 5xx.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any

from fastapi import FastAPI, Request, Response
from google.rpc import code_pb2, status_pb2

from serving.ingest.errors import IngestError
from serving.ingest.keys import ApiKey
from serving.ingest.metrics import IngestMetrics
from serving.ingest.otlp_answer import export_response, prejudged, relabel, span_outcomes
from serving.ingest.otlp_codec import JSON, PROTOBUF, decode_request, encode, media_type
from serving.ingest.otlp_mapping import map_request
from serving.ingest.service import IngestService, KafkaUnavailable, RateLimited
from serving.jsonscan import MalformedJson
from serving.request_body import BodyTooLarge, UnsupportedMediaType, read_capped

__all__ = ["TRACES_PATH", "add_traces_route"]

TRACES_PATH = "/v1/traces"
_REFUSALS = (IngestError, BodyTooLarge, MalformedJson, UnsupportedMediaType)
_GRPC_CODES = {401: code_pb2.UNAUTHENTICATED, 403: code_pb2.PERMISSION_DENIED,
               413: code_pb2.RESOURCE_EXHAUSTED, 429: code_pb2.RESOURCE_EXHAUSTED,
               503: code_pb2.UNAVAILABLE}
_BODY = {"required": True, "content": {
    PROTOBUF: {"schema": {"type": "string", "format": "binary",
                          "description": "An ExportTraceServiceRequest (opentelemetry-proto)"}},
    JSON: {"schema": {"type": "object", "description": "An ExportTraceServiceRequest in "
                                                       "OTLP/JSON (ids in hex)"}},
}}
_STATUS_DOC = {"description": "A google.rpc.Status naming the problem"}
_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "An ExportTraceServiceResponse; partial_success counts the rejected "
                         "spans and says why (and which spans made no event)"},
    400: _STATUS_DOC, 401: _STATUS_DOC, 403: _STATUS_DOC, 413: _STATUS_DOC, 415: _STATUS_DOC,
    429: _STATUS_DOC, 503: _STATUS_DOC,
}


def _status(http_status: int, message: str, media: str,
            retry_after_s: float | None = None) -> Response:
    status = status_pb2.Status(code=_GRPC_CODES.get(http_status, code_pb2.INVALID_ARGUMENT),
                               message=message)
    headers = {"Retry-After": str(max(1, math.ceil(retry_after_s)))} if retry_after_s else None
    return Response(encode(status, media), http_status, headers, media_type=media)


def add_traces_route(app: FastAPI, service: IngestService, metrics: IngestMetrics,
                     authenticate: Callable[[Request], ApiKey | None]) -> None:
    """Register ``POST /v1/traces`` on the ingest app, around the app's own service."""
    config = service.config

    @app.post(TRACES_PATH, response_model=None, responses=_RESPONSES,
              openapi_extra={"requestBody": _BODY, "security": [{"bearer": []}]},
              summary="Append the events OpenTelemetry GenAI spans map to (OTLP/HTTP, "
                      "protobuf or JSON, optionally gzip)")
    async def post_traces(request: Request) -> Response:
        response = await _handle(request)
        metrics.otlp_requests.labels(status=str(response.status_code)).inc()
        return response

    async def _handle(request: Request) -> Response:
        media = media_type(request.headers.get("content-type")) or JSON
        key = authenticate(request)
        if key is None:
            return _status(401, "missing or unknown API key: send `Authorization: Bearer <key>`",
                           media)
        try:
            body = await read_capped(request.stream(), request.headers.get("content-length"),
                                     config.caps.max_batch_bytes)
            export = decode_request(body, request.headers.get("content-type"),
                                    request.headers.get("content-encoding"), config.caps)
            mapping = map_request(export, key.org_id, config.otlp_trajectory_attribute,
                                  datetime.now(UTC), key.default_user)
            outcome = await service.ingest_events(
                key, [event.raw for event in mapping.events], relabel=partial(relabel, mapping),
                prejudged=prejudged(mapping))
        except RateLimited as exc:
            return _status(exc.status_code, f"API key {key.name!r} is over its rate of "
                           f"{key.rate_per_s:g} events/s", media, exc.retry_after_s)
        except KafkaUnavailable as exc:
            metrics.kafka_errors.inc()
            return _status(exc.status_code, exc.answer(), media,
                           config.unavailable_retry_after_s)
        except _REFUSALS as exc:  # after its subclasses above: each answer names its cause
            return _status(exc.status_code, str(exc), media)
        for span_outcome, count in span_outcomes(mapping, outcome).items():
            metrics.otlp_spans.labels(outcome=span_outcome).inc(count)
        answer = export_response(mapping, outcome)
        if outcome.status == 403:
            return _status(403, f"API key {key.name!r} may send none of the events these spans "
                           f"make: {answer.partial_success.error_message}", media)
        return Response(encode(answer, media), 200, media_type=media)

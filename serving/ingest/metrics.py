"""The ingest service's Prometheus metrics, in a registry of its own (one per app instance)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.registry import Collector

from infra.health_http import service_registry

__all__ = ["IngestMetrics"]


class IngestMetrics:
    def __init__(self, *collectors: Collector) -> None:
        self.registry = service_registry(*collectors)
        r = self.registry
        self.accepted = Counter("rewardstream_ingest_events_accepted_total",
                                "Events appended to events.raw and acknowledged", registry=r)
        self.rejected = Counter("rewardstream_ingest_events_rejected_total",
                                "Events rejected, by reason", ["reason"], registry=r)
        self.duplicates = Counter("rewardstream_ingest_events_duplicate_total",
                                  "Events answered as duplicates of an id already appended",
                                  registry=r)
        self.requests = Counter("rewardstream_ingest_requests_total",
                                "Requests to POST /v1/events, by HTTP status", ["status"],
                                registry=r)
        self.latency = Histogram(
            "rewardstream_ingest_request_seconds", "POST /v1/events latency, receipt to answer",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=r)
        self.kafka_errors = Counter("rewardstream_ingest_kafka_errors_total",
                                    "Requests answered 503 because Kafka did not acknowledge",
                                    registry=r)
        self.producer_replacements = Counter(
            "rewardstream_ingest_producer_replacements_total",
            "Kafka producers replaced after the leader refused their batch numbering "
            "(after a cluster outage)", registry=r)
        self.unexpected_errors = Counter(
            "rewardstream_ingest_unexpected_errors_total",
            "Requests answered 400 by the last-resort handler (a bug: see the log)", registry=r)
        self.otlp_requests = Counter("rewardstream_ingest_otlp_requests_total",
                                     "Requests to POST /v1/traces (OTLP), by HTTP status",
                                     ["status"], registry=r)
        self.otlp_spans = Counter(
            "rewardstream_ingest_otlp_spans_total",
            "OTLP spans by what became of them: events (all accepted or duplicates), rejected, "
            "or ignored_<reason> (no event: model_call, not_genai, operation_not_mapped)",
            ["outcome"], registry=r)
        self.dedupe_entries = Gauge("rewardstream_ingest_dedupe_entries",
                                    "Event ids held in the dedupe window", registry=r)
        self.dedupe_evicted_early = Gauge(
            "rewardstream_ingest_dedupe_evicted_early",
            "Ids evicted by the memory cap before the window ended (raise the cap if > 0)",
            registry=r)

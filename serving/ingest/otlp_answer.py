"""What an OTLP export is told, per span: pure functions over the mapping and the verdicts.

A rejection names the span attribute or field to fix (``gen_ai.tool.name``, not
``payload.tool``), in the answer and on the dead-letter topic alike. OTLP counts rejections in
spans: a span is rejected when any event it made was. Spans that made no event are not
rejected; the answer says how many there were and why, as OTLP allows for warnings.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceResponse,
)

from serving.ingest.otlp_mapping import RequestMapping
from serving.ingest.service import IngestOutcome
from serving.ingest.verdicts import Rejected

__all__ = ["export_response", "prejudged", "relabel", "span_outcomes"]

_SHOWN_REJECTIONS = 5
_MESSAGE_MAX_CHARS = 4000
_WHY_IGNORED = {
    "model_call": "model calls (completion.served comes only from the gateway, which sampled "
                  "the tokens and their logprobs)",
    "not_genai": "spans without gen_ai.operation.name",
    "operation_not_mapped": "GenAI operations that make no event",
}


def relabel(mapping: RequestMapping, rejected: Rejected) -> Rejected:
    """``rejected`` (of one of ``mapping``'s events) naming the span attribute or field its
    offending event field came from."""
    source = mapping.events[rejected.index].sources.get(rejected.field or "")
    if source is None:
        return rejected
    prefix = f"{rejected.field}: "
    problem = rejected.reason[len(prefix):] if rejected.reason.startswith(prefix) \
        else rejected.reason
    return replace(rejected, field=source,
                   reason=f"{source}: {problem} (the event's {rejected.field})")


def prejudged(mapping: RequestMapping) -> list[Rejected]:
    """The spans that could not make their events, as rejections indexed after the events."""
    first = len(mapping.events)
    return [Rejected(first + n, None, p.kind, p.field, p.reason, p.original)
            for n, p in enumerate(mapping.problems)]


def _span_of(mapping: RequestMapping, index: int) -> int:
    if index < len(mapping.events):
        return mapping.events[index].span
    return mapping.problems[index - len(mapping.events)].span


def span_outcomes(mapping: RequestMapping, outcome: IngestOutcome) -> Counter[str]:
    """Spans by what became of them: ``events``, ``rejected``, ``ignored_<reason>``."""
    rejected = {_span_of(mapping, r.index) for r in outcome.rejected}
    made = {event.span for event in mapping.events} - rejected
    counts = Counter({"events": len(made), "rejected": len(rejected)})
    counts.update({f"ignored_{reason}": n for reason, n in mapping.ignored.items()})
    return +counts


def _rejections(mapping: RequestMapping, outcome: IngestOutcome) -> tuple[int, str]:
    by_span: dict[int, Rejected] = {}
    for rejection in sorted(outcome.rejected, key=lambda r: r.index):
        by_span.setdefault(_span_of(mapping, rejection.index), rejection)
    if not by_span:
        return 0, ""
    shown = []
    for span, rejection in sorted(by_span.items())[:_SHOWN_REJECTIONS]:
        ref = mapping.spans[span]
        shown.append(f"span {ref.span_id} {ref.name!r} of trace {ref.trace_id}: "
                     f"{rejection.kind}: {rejection.reason}")
    more = len(by_span) - len(shown)
    return len(by_span), (f"{len(by_span)} of {len(mapping.spans)} spans rejected (kept on the "
                          "dead-letter topic): " + "; ".join(shown)
                          + (f"; and {more} more" if more else ""))


def export_response(mapping: RequestMapping, outcome: IngestOutcome) -> ExportTraceServiceResponse:
    """OTLP's answer: ``partial_success`` with the rejected spans and why, or, when none was
    rejected, the spans that made no event as a warning; empty when there is nothing to say."""
    rejected_spans, message = _rejections(mapping, outcome)
    if mapping.ignored:
        ignored = ", ".join(f"{n} {_WHY_IGNORED.get(reason, reason)}"
                            for reason, n in sorted(mapping.ignored.items()))
        message = "; ".join(filter(None, [message, f"spans that made no event: {ignored}"]))
    if not message:
        return ExportTraceServiceResponse()
    if len(message) > _MESSAGE_MAX_CHARS:
        message = message[:_MESSAGE_MAX_CHARS - 1] + "…"
    return ExportTraceServiceResponse(partial_success=ExportTracePartialSuccess(
        rejected_spans=rejected_spans, error_message=message))

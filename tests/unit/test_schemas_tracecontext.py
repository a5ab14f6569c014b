"""W3C trace context as trajectory ids: one id form from OTLP bytes, OpenTelemetry's integer
and a traceparent's hex; baggage read within its limits."""

from __future__ import annotations

from schemas.tracecontext import (
    format_traceparent,
    parse_baggage,
    parse_traceparent,
    trajectory_id_of_trace,
)

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def test_every_form_of_a_trace_id_names_the_same_trajectory() -> None:
    assert trajectory_id_of_trace(bytes.fromhex(TRACE)) == TRACE
    assert trajectory_id_of_trace(int(TRACE, 16)) == TRACE
    assert trajectory_id_of_trace(TRACE.upper()) == TRACE
    assert trajectory_id_of_trace(1) == "0" * 31 + "1"  # leading zeros kept


def test_a_traceparent_round_trips() -> None:
    header = format_traceparent(TRACE, "00f067aa0ba902b7", sampled=False)
    parsed = parse_traceparent(header)
    assert parsed is not None and (parsed.trace_id, parsed.parent_id, parsed.sampled) == (
        TRACE, "00f067aa0ba902b7", False)


def test_baggage_members_are_decoded_and_malformed_ones_skipped() -> None:
    assert parse_baggage(" user.id = a%20b ;p=1, bad member ,k=v,k=w,=x, n") == {
        "user.id": "a b", "k": "v"}
    assert parse_baggage("k=" + "v" * 9000) == {}  # over the 8192-byte limit: ignored
    assert len(parse_baggage(",".join(f"k{i}=v" for i in range(500)))) == 180

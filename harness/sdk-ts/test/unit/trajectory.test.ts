import assert from "node:assert/strict";
import test from "node:test";

import { trajectoryFromSpanContext, trajectoryFromTraceparent } from "../../src/trajectory.js";

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";

test("a traceparent names the trajectory as the gateway and OTLP ingest name its trace", () => {
  const traj = trajectoryFromTraceparent(`00-${TRACE}-00f067aa0ba902b7-01`, {
    user: "dev-1",
    checkpoint_id: "ckpt-7",
  });
  assert.deepEqual(traj, {
    trajectory_id: TRACE,
    session_id: TRACE,
    user: "dev-1",
    checkpoint_id: "ckpt-7",
    arm: "default",
  });
  const later = trajectoryFromTraceparent(`01-${TRACE}-00f067aa0ba902b7-00-more`, {
    user: "dev-1",
    checkpoint_id: "c",
    session_id: "s",
    arm: "canary",
  });
  assert.equal(later.trajectory_id, TRACE);
  assert.equal(later.session_id, "s");
});

test("an invalid traceparent throws, as W3C says it must not be guessed at", () => {
  for (const bad of [
    "",
    "garbage",
    `ff-${TRACE}-00f067aa0ba902b7-01`,
    `00-${"0".repeat(32)}-00f067aa0ba902b7-01`,
    `00-${TRACE}-${"0".repeat(16)}-01`,
    `00-${TRACE.toUpperCase()}-00f067aa0ba902b7-01`,
    `00-${TRACE}-00f067aa0ba902b7-01-extra`,
  ]) {
    assert.throws(() => trajectoryFromTraceparent(bad, { user: "u", checkpoint_id: "c" }), TypeError);
  }
});

// The shape of @opentelemetry/api's SpanContext, which this SDK does not depend on: what
// trace.getActiveSpan()?.spanContext() returns.
interface OtelSpanContext {
  traceId: string;
  spanId: string;
  isRemote?: boolean;
  traceFlags: number;
  traceState?: { serialize(): string };
}

test("a span context names the trajectory as its traceparent does", () => {
  const active: OtelSpanContext | undefined = {
    traceId: TRACE,
    spanId: "00f067aa0ba902b7",
    traceFlags: 1,
    isRemote: false,
    traceState: { serialize: () => "" },
  };
  const fields = { user: "dev-1", checkpoint_id: "ckpt-7" };
  const fromSpan = trajectoryFromSpanContext(active, fields);
  const fromHeader = trajectoryFromTraceparent(`00-${TRACE}-00f067aa0ba902b7-01`, fields);
  assert.equal(fromSpan.trajectory_id, fromHeader.trajectory_id);
  assert.deepEqual(fromSpan, fromHeader);
  // Only the trace names it: another span of the trace, unsampled, is the same trajectory.
  const sibling = trajectoryFromSpanContext({ traceId: TRACE, spanId: "b7ad6b7169203331" }, fields);
  assert.equal(sibling.trajectory_id, TRACE);
  assert.equal(trajectoryFromSpanContext({ traceId: TRACE.toUpperCase() }, fields).trajectory_id, TRACE);
  const named = trajectoryFromSpanContext(active, { ...fields, session_id: "s", arm: "canary" });
  assert.equal(named.session_id, "s");
  assert.equal(named.arm, "canary");
});

test("no span context, or an invalid one, throws naming what is wrong", () => {
  const fields = { user: "u", checkpoint_id: "c" };
  // What @opentelemetry/api gives when no SDK is registered: INVALID_SPAN_CONTEXT.
  const invalid: OtelSpanContext = { traceId: "0".repeat(32), spanId: "0".repeat(16), traceFlags: 0 };
  assert.throws(() => trajectoryFromSpanContext(invalid, fields), {
    name: "TypeError",
    message: /not a valid OpenTelemetry trace id/,
  });
  assert.throws(() => trajectoryFromSpanContext(undefined, fields), {
    name: "TypeError",
    message: /no span context/,
  });
  for (const traceId of ["", "garbage", TRACE.slice(1), `${TRACE}0`, `${TRACE.slice(1)}g`]) {
    assert.throws(() => trajectoryFromSpanContext({ traceId }, fields), /trace id/);
  }
  for (const spanId of ["0".repeat(16), "short", `${"a".repeat(15)}z`]) {
    assert.throws(() => trajectoryFromSpanContext({ traceId: TRACE, spanId }, fields), /span id/);
  }
});

/** Who and where: the envelope fields shared by every event of one trajectory. */
export interface Trajectory {
  readonly trajectory_id: string;
  readonly session_id: string;
  /** The client's own user id; ingest replaces it with a keyed pseudonym. */
  readonly user: string;
  readonly checkpoint_id: string;
  /** The A/B arm; "default" when absent. */
  readonly arm?: string;
}

/** The fields of a trajectory that a trace does not give. */
export interface TraceTrajectoryFields {
  readonly user: string;
  readonly checkpoint_id: string;
  /** Default: the trajectory id. */
  readonly session_id?: string;
  readonly arm?: string;
}

// W3C Trace Context: version-trace_id-parent_id-flags, lower-case hex; version 00 has exactly
// four fields, a later one may append more; ff, and all-zero ids, are invalid.
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/**
 * What an OpenTelemetry span context carries that names its trace: the shape of
 * `trace.getActiveSpan()?.spanContext()` in `@opentelemetry/api` (which this SDK does not
 * depend on), so the one may be passed as the other.
 */
export interface SpanContextLike {
  /** 32 hex digits, not all zero. */
  readonly traceId: string;
  /** 16 hex digits, not all zero, when given. */
  readonly spanId?: string;
  readonly traceFlags?: number;
}

const TRACE_ID = /^[0-9a-f]{32}$/i;
const SPAN_ID = /^[0-9a-f]{16}$/i;
const ALL_ZERO = /^0+$/;

/** The trajectory named by a trace id, as the whole platform names it. */
function trajectoryOfTrace(traceId: string, fields: TraceTrajectoryFields): Trajectory {
  // The trace id's 32 lower-case hex digits (schemas/tracecontext.py, trajectory_id_of_trace).
  const trajectoryId = traceId.toLowerCase();
  return {
    trajectory_id: trajectoryId,
    session_id: fields.session_id ?? trajectoryId,
    user: fields.user,
    checkpoint_id: fields.checkpoint_id,
    arm: fields.arm ?? "default",
  };
}

/**
 * The trajectory of a W3C trace, from a `traceparent` header (an OpenTelemetry context's, or
 * the one the agent's request carried): the same id the gateway gives the requests of that
 * trace and OTLP ingest gives its spans (the trace id's 32 lower-case hex digits), so an
 * editor's events join the agent's completions without a custom id. Throws a TypeError for a
 * header that is not a valid traceparent.
 */
export function trajectoryFromTraceparent(
  traceparent: string,
  fields: TraceTrajectoryFields,
): Trajectory {
  const match = TRACEPARENT.exec(traceparent.trim());
  const [, version, traceId, parentId, , rest] = match ?? [];
  const valid =
    match !== null &&
    version !== "ff" &&
    !(version === "00" && rest !== undefined) &&
    !ALL_ZERO.test(traceId ?? "") &&
    !ALL_ZERO.test(parentId ?? "");
  if (!valid || traceId === undefined) {
    throw new TypeError(`not a W3C traceparent: ${traceparent.slice(0, 80)}`);
  }
  return trajectoryOfTrace(traceId, fields);
}

/**
 * The trajectory of the OpenTelemetry trace a span belongs to, from its span context:
 * `trajectoryFromSpanContext(trace.getActiveSpan()?.spanContext(), { user, checkpoint_id })`
 * inside the agent's span names the trajectory as `trajectoryFromTraceparent` does for the same
 * trace, and as the gateway and OTLP ingest do. Throws a TypeError when there is no span
 * context (no active span) or it is not valid: a trace id that is not 32 hex digits or is all
 * zero (the context OpenTelemetry gives when no SDK is registered), or a span id that is not 16
 * hex digits or is all zero.
 */
export function trajectoryFromSpanContext(
  spanContext: SpanContextLike | undefined | null,
  fields: TraceTrajectoryFields,
): Trajectory {
  if (spanContext === undefined || spanContext === null) {
    throw new TypeError(
      "no span context: call this inside the agent's span (trace.getActiveSpan() is " +
        "undefined when there is none), or use trajectoryFromTraceparent",
    );
  }
  const { traceId, spanId } = spanContext;
  if (typeof traceId !== "string" || !TRACE_ID.test(traceId) || ALL_ZERO.test(traceId)) {
    throw new TypeError(
      `not a valid OpenTelemetry trace id (32 hex digits, not all zero): ` +
        `${String(traceId).slice(0, 80)}; is an OpenTelemetry SDK registered and a span active?`,
    );
  }
  if (spanId !== undefined && (!SPAN_ID.test(spanId) || ALL_ZERO.test(spanId))) {
    throw new TypeError(
      `not a valid OpenTelemetry span id (16 hex digits, not all zero): ${spanId.slice(0, 80)}`,
    );
  }
  return trajectoryOfTrace(traceId, fields);
}

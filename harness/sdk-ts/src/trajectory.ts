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
    !/^0+$/.test(traceId ?? "") &&
    !/^0+$/.test(parentId ?? "");
  if (!valid || traceId === undefined) {
    throw new TypeError(`not a W3C traceparent: ${traceparent.slice(0, 80)}`);
  }
  return {
    trajectory_id: traceId,
    session_id: fields.session_id ?? traceId,
    user: fields.user,
    checkpoint_id: fields.checkpoint_id,
    arm: fields.arm ?? "default",
  };
}

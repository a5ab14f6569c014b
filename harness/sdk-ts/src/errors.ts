/** What the client reports instead of throwing into the host. */

export type TelemetryErrorKind =
  | "invalid_event" // refused by emit: not a valid event (named field and reason)
  | "queue_full" // refused by emit: the queue is at its bound
  | "storage" // the storage failed (emit refused the event, or the sender could not read)
  | "closed" // refused by emit: the client was closed
  | "undeliverable" // ingest can never accept a batch (4xx other than 408/429): dropped
  | "gave_up" // a batch still failing (5xx, 408, 429, no connection) when its retry budget ran out
  | "rejected" // ingest dead-lettered an event, with its reason
  | "network"; // ingest unreachable or failing (5xx, 408, 429): the batch is retried

export class TelemetryError extends Error {
  constructor(readonly kind: TelemetryErrorKind, message: string) {
    super(message);
    this.name = "TelemetryError";
  }
}

/**
 * The default ``onError``: a console warning for the 1st, 2nd, 4th, 8th ... error of each kind,
 * so a failing storage or ingest is seen without flooding the host's log.
 */
export function warnSparsely(): (error: TelemetryError) => void {
  const seen = new Map<TelemetryErrorKind, number>();
  return (error) => {
    const n = (seen.get(error.kind) ?? 0) + 1;
    seen.set(error.kind, n);
    if ((n & (n - 1)) === 0) {
      console.warn(`rewardstream telemetry (${n}x ${error.kind}): ${error.message}`);
    }
  };
}

/** What to do with each ingest answer and how long to wait before retrying: pure functions. */

export type Action =
  | "done" // the server took responsibility for every event (accepted, duplicate, rejected)
  | "retry" // nothing was taken; send the same events again later
  | "split" // over a size cap: send each half on its own
  | "drop"; // the server can never accept this body: counted as undeliverable, never silent

export function classify(status: number): Action {
  // 403: the key may send none of the batch's types; the server dead-lettered each event.
  if ((status >= 200 && status < 300) || status === 403) return "done";
  if (status === 413) return "split";
  // 408 and 429 say "later"; 5xx (503 while Kafka is away) is the server's own trouble.
  if (status === 408 || status === 429 || status >= 500) return "retry";
  if (status >= 400) return "drop";
  return "retry";
}

/** Retry-After in milliseconds: delta-seconds or an HTTP date (RFC 9110 §10.2.3); else null. */
export function parseRetryAfterMs(value: string | null, nowMs: number = Date.now()): number | null {
  const text = value?.trim();
  if (!text) return null;
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const when = Date.parse(text);
  return Number.isNaN(when) ? null : Math.max(0, when - nowMs);
}

/**
 * Exponential backoff with equal jitter: half fixed, half random (``rand`` in [0, 1)). The
 * server's Retry-After is a floor, plus a little jitter so clients told the same Retry-After do
 * not all come back in the same instant.
 */
export function backoffDelayMs(
  attempt: number, baseMs: number, capMs: number, retryAfterMs: number | null, rand: number,
): number {
  const ceilingMs = Math.min(capMs, baseMs * 2 ** Math.min(attempt, 30));
  const delayMs = ceilingMs / 2 + (rand * ceilingMs) / 2;
  return retryAfterMs === null ? delayMs : Math.max(delayMs, retryAfterMs + rand * baseMs);
}

/**
 * Sending queued events to ingest: gzip'd NDJSON batches, retried with backoff and jitter never
 * sooner than Retry-After within a budget per batch, halved on 413, dropped (counted) on a 4xx
 * that can never succeed or when the budget is spent.
 */

import { TelemetryError } from "./errors.js";
import { type Action, backoffDelayMs, classify, parseRetryAfterMs } from "./retry.js";

const MAX_BODY_BYTES = 4 << 20; // decompressed; well under the server's 10 MiB batch cap
const encoder = new TextEncoder();

export interface DeliveryOptions {
  readonly batchSize: number;
  readonly timeoutMs: number;
  readonly backoffBaseMs: number;
  readonly backoffCapMs: number;
  readonly retryMaxAttempts: number;
  readonly retryBudgetMs: number;
}

export interface DeliveryCounts {
  sent: number;
  duplicates: number;
  rejected: number;
  retries: number;
}

interface IngestAnswer {
  accepted?: unknown[];
  duplicates?: unknown[];
  rejected?: { event_id?: string; field?: string; reason?: string }[];
}

/** Resolves after ``ms`` or as soon as ``signal`` aborts; does not keep Node alive. */
export function sleep(ms: number, signal?: AbortSignal, keepAlive = false): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, Math.max(0, ms));
    if (!keepAlive && typeof timer === "object") timer.unref?.();
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done);
  });
}

async function gzip(text: string): Promise<ArrayBuffer> {
  const stream = new Blob([text]).stream().pipeThrough(new CompressionStream("gzip"));
  return new Response(stream).arrayBuffer();
}

export class Delivery {
  readonly counts: DeliveryCounts = { sent: 0, duplicates: 0, rejected: 0, retries: 0 };
  private readonly headers: Record<string, string>;

  constructor(
    private readonly url: string, apiKey: string, private readonly options: DeliveryOptions,
    private readonly signal: AbortSignal,
    private readonly drop: (counter: string, n: number, error: TelemetryError) => void,
    private readonly report: (error: TelemetryError) => void,
  ) {
    this.headers = { "Authorization": `Bearer ${apiKey}`, "Content-Encoding": "gzip",
                     "Content-Type": "application/x-ndjson" };
  }

  /** Send a segment's events in batches; false only when stopped before all were taken. */
  async sendAll(lines: readonly string[]): Promise<boolean> {
    let chunk: Record<string, unknown>[] = [];
    let size = 0;
    for (const line of lines) {
      let event: Record<string, unknown>;
      try {
        event = JSON.parse(line) as Record<string, unknown>;
      } catch {
        this.drop("dropped_torn", 1, new TelemetryError("storage", "an unreadable queued line"));
        continue;
      }
      const bytes = encoder.encode(line).length + 1;
      if (chunk.length > 0 &&
          (chunk.length >= this.options.batchSize || size + bytes > MAX_BODY_BYTES)) {
        if (!(await this.deliver(chunk))) return false;
        chunk = [];
        size = 0;
      }
      chunk.push(event);
      size += bytes;
    }
    return chunk.length === 0 || this.deliver(chunk);
  }

  /** The batch as sent now: each event's sent_at is this attempt's time. */
  private static body(events: readonly Record<string, unknown>[]): string {
    const sentAt = new Date().toISOString();
    return events.map((event) => JSON.stringify({ ...event, sent_at: sentAt })).join("\n");
  }

  /**
   * Send until the server takes responsibility, the events prove undeliverable or the retry
   * budget is spent (all true); false only when stopped (the events stay queued).
   */
  private async deliver(events: readonly Record<string, unknown>[]): Promise<boolean> {
    const startedMs = Date.now();
    for (let attempt = 0; !this.signal.aborted; attempt++) {
      let action: Action = "retry";
      let retryAfterMs: number | null = null;
      let answer = "";
      let failure = "";
      try {
        const response = await fetch(this.url, {
          method: "POST", headers: this.headers, body: await gzip(Delivery.body(events)),
          signal: AbortSignal.any([this.signal, AbortSignal.timeout(this.options.timeoutMs)]),
        });
        answer = await response.text();
        action = classify(response.status);
        retryAfterMs = parseRetryAfterMs(response.headers.get("retry-after"));
        if (action === "retry") {
          failure = `ingest answered ${response.status}`;
          this.report(new TelemetryError("network", failure));
        } else if (action === "drop" || (action === "split" && events.length === 1)) {
          this.drop("dropped_undeliverable", events.length, new TelemetryError("undeliverable",
            `ingest answered ${response.status}; ${events.length} events dropped: ` +
            answer.slice(0, 300)));
          return true;
        }
      } catch (error) {
        if (this.signal.aborted) return false;
        failure = `ingest unreachable: ${String(error)}`;
        this.report(new TelemetryError("network", failure));
      }
      if (action === "done") {
        this.record(answer);
        return true;
      }
      if (action === "split") {
        const half = Math.floor(events.length / 2);
        return (await this.deliver(events.slice(0, half))) && this.deliver(events.slice(half));
      }
      const { backoffBaseMs, backoffCapMs, retryMaxAttempts, retryBudgetMs } = this.options;
      const delayMs = backoffDelayMs(attempt, backoffBaseMs, backoffCapMs, retryAfterMs,
                                     Math.random());
      // A retry whose wait would pass the budget is not started.
      if (attempt + 1 >= retryMaxAttempts || Date.now() + delayMs - startedMs > retryBudgetMs) {
        this.drop("dropped_gave_up", events.length, new TelemetryError("gave_up",
          `${failure}; retry budget (${retryMaxAttempts} attempts, ${retryBudgetMs / 1000} s) ` +
          `spent after ${attempt + 1} attempts: ${events.length} events dropped`));
        return true;
      }
      this.counts.retries += 1;
      await sleep(delayMs, this.signal);
    }
    return false;
  }

  private record(answer: string): void {
    let body: IngestAnswer;
    try {
      body = JSON.parse(answer) as IngestAnswer;
    } catch {
      this.report(new TelemetryError("network", `ingest answered a body that is not JSON`));
      return;
    }
    this.counts.sent += body.accepted?.length ?? 0;
    this.counts.duplicates += body.duplicates?.length ?? 0;
    const rejected = body.rejected ?? [];
    this.counts.rejected += rejected.length;
    for (const rejection of rejected.slice(0, 5)) {
      this.report(new TelemetryError("rejected", `event ${rejection.event_id} rejected: ` +
        `${rejection.field}: ${rejection.reason}`));
    }
  }
}

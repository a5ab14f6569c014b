/**
 * The {@link Telemetry} client: events into storage first, then batched, gzip'd and retried to
 * ingest. ``emit`` only validates and appends a line; sending runs on the event loop. No public
 * method throws into the host: problems are counted in {@link TelemetryStats} and reported to
 * ``onError``.
 */

import { Delivery, sleep } from "./delivery.js";
import { TelemetryError, warnSparsely } from "./errors.js";
import {
  EVENT_SCHEMAS, EventConstructors, SCHEMA_VERSIONS, type Event, type EventType, type PayloadOf,
} from "./generated/events.js";
import { uuid7 } from "./ids.js";
import { MemoryStorage } from "./memoryStorage.js";
import { EventQueue } from "./queue.js";
import { crossFieldProblem } from "./rules.js";
import { parseDateTime, validate, withDefaults } from "./schema.js";
import type { QueueStorage } from "./storage.js";
import type { Trajectory } from "./trajectory.js";

export interface TelemetryOptions {
  /** Where queued events live: FileStorage in Node, MemoryStorage or the host's own elsewhere. */
  storage: QueueStorage;
  /** Send when this many events wait (default 500) ... */
  batchSize?: number;
  /** ... or when the oldest has waited this long (default 250 ms). */
  lingerMs?: number;
  /** Bounds of the queue; beyond them emit returns false and counts (200,000 / 128 MiB). */
  maxQueueEvents?: number;
  maxQueueBytes?: number;
  /** Per request (default 30 s). */
  timeoutMs?: number;
  /** Retry waits: from base (250 ms) doubling up to cap (30 s), with jitter, >= Retry-After. */
  backoffBaseMs?: number;
  backoffCapMs?: number;
  /** A batch is dropped (droppedGaveUp) after this many attempts (50) or this long (900 s). */
  retryMaxAttempts?: number;
  retryBudgetMs?: number;
  /** Told of every problem instead of an exception (default: sparse console warnings). */
  onError?: (error: TelemetryError) => void;
}

export interface TelemetryStats {
  queued: number; // in storage, not yet taken by ingest
  sent: number; // accepted by ingest (appended to events.raw)
  duplicates: number; // already appended earlier (a retry of a batch ingest had taken)
  rejected: number; // refused by ingest, which dead-lettered them with a reason
  retries: number;
  droppedQueueFull: number; // refused by emit: the queue was full
  droppedInvalid: number; // refused by emit: not a valid event
  droppedStorage: number; // refused by emit: the storage failed
  droppedClosed: number; // refused by emit: after close()
  droppedUndeliverable: number; // batches ingest can never accept (4xx but 408/429, oversize)
  droppedGaveUp: number; // still failing (5xx, 408, 429, no connection) when the budget ran out
  droppedTorn: number; // half-written lines found after a crash
}

/** Events a client was given that will not reach the log: dropped for any reason, or rejected. */
function lost(stats: TelemetryStats): number {
  return stats.rejected + stats.droppedQueueFull + stats.droppedInvalid + stats.droppedStorage +
    stats.droppedClosed + stats.droppedUndeliverable + stats.droppedGaveUp + stats.droppedTorn;
}

/** ``occurredAt`` as a valid Date (now when absent); throws, naming the field, otherwise. */
function eventTime(occurredAt: Date | string | undefined): Date {
  if (occurredAt === undefined) return new Date();
  const when = typeof occurredAt === "string" ? parseDateTime(occurredAt)
    : occurredAt instanceof Date && !isNaN(occurredAt.getTime()) ? occurredAt : null;
  if (when === null) {
    const got = typeof occurredAt === "string" ? JSON.stringify(occurredAt)
      : occurredAt instanceof Date ? "an invalid Date" : `a ${typeof occurredAt}`;
    throw new TelemetryError("invalid_event", "occurredAt: must be a Date or an ISO-8601 " +
                             `date-time with a time zone (2025-01-31T12:00:00Z), got ${got}`);
  }
  return when;
}

const POLL_MS = 25;
const STORAGE_RETRY_MS = 1000;

export class Telemetry extends EventConstructors {
  private readonly queue: EventQueue;
  private readonly delivery: Delivery;
  private readonly report: (error: TelemetryError) => void;
  private readonly stop = new AbortController();
  private readonly batchSize: number;
  private readonly lingerMs: number;
  private lingerTimer: ReturnType<typeof setTimeout> | null = null;
  private lingerExpired = false;
  private flushWanted = false;
  private pumping: Promise<void> | null = null;
  private pumpAgain = false;
  private closing: Promise<boolean> | null = null;
  private closed = false;

  /** ``endpointUrl``: ingest's base URL (``http://host:8400``) or its ``/v1/events`` URL. */
  constructor(endpointUrl: string, apiKey: string, options: TelemetryOptions) {
    super();
    const onError = options?.onError ?? warnSparsely();
    this.report = (error) => {
      try {
        onError(error);
      } catch {
        // The host's handler failed; nothing more to tell it.
      }
    };
    this.batchSize = options?.batchSize ?? 500;
    this.lingerMs = options?.lingerMs ?? 250;
    const base = String(endpointUrl).replace(/\/+$/, "");
    const url = base.endsWith("/v1/events") ? base : `${base}/v1/events`;
    this.queue = new EventQueue(options?.storage ?? new MemoryStorage(), {
      maxEvents: options?.maxQueueEvents ?? 200_000,
      maxBytes: options?.maxQueueBytes ?? 128 << 20,
    });
    this.delivery = new Delivery(url, apiKey, {
      batchSize: this.batchSize, timeoutMs: options?.timeoutMs ?? 30_000,
      backoffBaseMs: options?.backoffBaseMs ?? 250, backoffCapMs: options?.backoffCapMs ?? 30_000,
      retryMaxAttempts: options?.retryMaxAttempts ?? 50,
      retryBudgetMs: options?.retryBudgetMs ?? 900_000,
    }, this.stop.signal, (counter, n, error) => this.refuse(counter, error, n), this.report);
    if (this.openQueue()) this.kick(); // send what an earlier process left
  }

  // ------------------------------------------------------------------------------- public

  /** Queue any event; false (counted, reported) when it is invalid or cannot be stored. */
  emit(event: Event): boolean {
    try {
      if (this.closed) {
        return this.refuse("dropped_closed", new TelemetryError("closed", "emit() after close()"));
      }
      if (!this.openQueue()) return this.refuse("dropped_storage");
      const type = event?.type;
      if (typeof type !== "string" || !Object.hasOwn(EVENT_SCHEMAS, type)) {
        return this.refuse("dropped_invalid", new TelemetryError("invalid_event",
          `type: must be one of ${Object.keys(EVENT_SCHEMAS).join(", ")}, got ${String(type)}`));
      }
      const schema = EVENT_SCHEMAS[type];
      const complete = withDefaults(schema, event);
      const problem = validate(schema, complete) ?? crossFieldProblem(complete);
      if (problem !== null) {
        const error = new TelemetryError("invalid_event", `${type} ${problem}`);
        return this.refuse("dropped_invalid", error);
      }
      if (!this.queue.put(JSON.stringify(complete))) {
        this.report(new TelemetryError("queue_full", `the queue is full: event dropped`));
        return false;
      }
      this.schedule();
      return true;
    } catch (error) {
      return this.refuse("dropped_storage",
                         new TelemetryError("storage", `cannot store the event: ${String(error)}`));
    }
  }

  /** Send everything queued; true when the queue is empty, false at the timeout. */
  async flush(timeoutMs = 30_000): Promise<boolean> {
    try {
      const deadlineMs = Date.now() + timeoutMs;
      this.flushWanted = true;
      this.kick();
      while (this.queue.pendingEvents > 0 && Date.now() < deadlineMs &&
             !this.stop.signal.aborted) {
        await sleep(Math.min(POLL_MS, deadlineMs - Date.now()), undefined, true);
        this.kick();
      }
      return this.queue.pendingEvents === 0;
    } catch {
      return false;
    }
  }

  /**
   * Flush for up to ``timeoutMs``, then stop; what is unsent stays in storage for next time.
   * Resolves true only when nothing is left queued and no event this client was given was lost
   * (dropped for any reason, or rejected by ingest): ``stats()`` says what. Closing again
   * answers the same.
   */
  close(timeoutMs = 30_000): Promise<boolean> {
    this.closing ??= this.shutDown(timeoutMs);
    return this.closing;
  }

  /** This client's counts (from zero when it was made) and what is queued now. */
  stats(): TelemetryStats {
    const c = this.queue.counted;
    return {
      queued: this.queue.pendingEvents, ...this.delivery.counts,
      droppedQueueFull: c["dropped_queue_full"] ?? 0, droppedInvalid: c["dropped_invalid"] ?? 0,
      droppedStorage: c["dropped_storage"] ?? 0, droppedClosed: c["dropped_closed"] ?? 0,
      droppedUndeliverable: c["dropped_undeliverable"] ?? 0,
      droppedGaveUp: c["dropped_gave_up"] ?? 0, droppedTorn: c["dropped_torn"] ?? 0,
    };
  }

  protected record<T extends EventType>(
    type: T, trajectory: Trajectory, payload: PayloadOf[T], occurredAt?: Date | string,
  ): string | null {
    const when = eventTime(occurredAt); // throws: a wrong kind of value is the caller's bug
    try {
      const at = when.toISOString();
      const event = {
        event_id: uuid7(when.getTime()), type, schema_version: SCHEMA_VERSIONS[type],
        trajectory_id: trajectory.trajectory_id, session_id: trajectory.session_id,
        user: trajectory.user, checkpoint_id: trajectory.checkpoint_id, arm: trajectory.arm,
        // sent_at is rewritten on every send attempt; occurred_at holds its place until then.
        occurred_at: at, sent_at: at, payload,
      };
      return this.emit(event as unknown as Event) ? event.event_id : null;
    } catch (error) {
      this.refuse("dropped_invalid", new TelemetryError("invalid_event",
                  `cannot make a ${type} event: ${String(error)}`));
      return null;
    }
  }

  // ------------------------------------------------------------------------------- inside

  /** Count ``n`` dropped events under ``counter``, report why; always false. */
  private refuse(counter: string, error?: TelemetryError, n = 1): false {
    this.queue.count(counter, n);
    if (error !== undefined) this.report(error);
    return false;
  }

  private openQueue(): boolean {
    if (this.queue.isOpen) return true;
    try {
      this.queue.open();
      return true;
    } catch (error) {
      this.report(new TelemetryError("storage", `cannot open the queue storage: ${String(error)}`));
      return false;
    }
  }

  private schedule(): void {
    if (this.queue.unsealedEvents >= this.batchSize) {
      this.kick();
    } else if (this.lingerTimer === null) {
      this.lingerTimer = setTimeout(() => {
        this.lingerTimer = null;
        this.lingerExpired = true;
        this.kick();
      }, this.lingerMs);
      if (typeof this.lingerTimer === "object") this.lingerTimer.unref?.();
    }
  }

  /** Run the sender soon (after the caller's synchronous work), or once more if it runs. */
  private kick(): void {
    if (this.stop.signal.aborted) return;
    if (this.pumping !== null) {
      this.pumpAgain = true;
      return;
    }
    this.pumping = new Promise<void>((resolve) => queueMicrotask(resolve))
      .then(() => this.pump())
      .catch((error: unknown) => this.report(new TelemetryError("storage", String(error))))
      .finally(() => {
        this.pumping = null;
        if (this.pumpAgain) this.kick();
      });
  }

  private due(): boolean {
    const waiting = this.queue.unsealedEvents;
    return waiting >= this.batchSize || (waiting > 0 && (this.flushWanted || this.lingerExpired));
  }

  private async pump(): Promise<void> {
    try {
      do {
        this.pumpAgain = false;
        if (this.due()) {
          this.queue.seal();
          this.lingerExpired = false;
        }
        for (const segment of this.queue.sealed()) {
          if (!(await this.delivery.sendAll(this.queue.read(segment)))) return;
          this.queue.remove(segment);
        }
      } while (this.pumpAgain && !this.stop.signal.aborted);
      if (this.queue.pendingEvents === 0) this.flushWanted = false;
    } catch (error) {
      // A storage that fails to read must not stop the sender: say so and try again later.
      this.report(new TelemetryError("storage", `cannot send from the queue: ${String(error)}`));
      await sleep(STORAGE_RETRY_MS, this.stop.signal);
      this.pumpAgain = true;
    }
  }

  private async shutDown(timeoutMs: number): Promise<boolean> {
    try {
      const flushed = await this.flush(timeoutMs);
      this.stop.abort();
      if (this.lingerTimer !== null) clearTimeout(this.lingerTimer);
      await this.pumping;
      this.closed = true;
      const empty = this.queue.pendingEvents === 0;
      this.queue.close();
      return flushed && empty && lost(this.stats()) === 0;
    } catch (error) {
      this.closed = true;
      this.report(new TelemetryError("storage", `cannot close the queue: ${String(error)}`));
      return false;
    }
  }
}

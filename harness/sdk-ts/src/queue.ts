/**
 * A bounded queue of events over a {@link QueueStorage}. Events are appended to the open segment;
 * the sender seals it (later events go to the next segment), sends sealed segments oldest first
 * and removes each once ingest has taken all of it. A full queue refuses events and counts them;
 * counters of drops persist in the storage, summed over every client that used it.
 */

import type { QueueStorage } from "./storage.js";

const encoder = new TextEncoder();

export interface QueueLimits {
  readonly maxEvents: number;
  readonly maxBytes: number;
}

export class EventQueue {
  /** Drops and the like (``dropped_queue_full``, ``dropped_torn`` ...), persisted: the sums
   * over every client that used the storage. */
  readonly counters: Record<string, number> = {};
  /** The same counts, of this queue only (the client's stats start at zero). */
  readonly counted: Record<string, number> = {};
  private readonly sizes = new Map<number, { events: number; bytes: number }>();
  private openSegment = -1;
  private openEvents = 0;
  private openBytes = 0;
  private sealedEvents = 0;
  private sealedBytes = 0;
  private nextSegment = 0;
  private opened = false;
  /** When the first event of the open segment was appended (ms since the epoch). */
  firstUnsealedAtMs: number | null = null;

  constructor(private readonly storage: QueueStorage, private readonly limits: QueueLimits) {}

  get isOpen(): boolean {
    return this.opened;
  }

  /** Take the storage and recover what an earlier process left; throws when it cannot. */
  open(): void {
    if (this.opened) return;
    this.storage.open();
    for (const [name, n] of Object.entries(this.storage.loadCounters())) {
      this.counters[name] = (this.counters[name] ?? 0) + n;
    }
    let torn = 0;
    for (const segment of this.storage.list()) {
      const read = this.storage.read(segment);
      torn += read.torn;
      if (read.lines.length === 0) {
        this.storage.remove(segment);
        continue;
      }
      const bytes = read.lines.reduce((sum, line) => sum + encoder.encode(line).length + 1, 0);
      this.sizes.set(segment, { events: read.lines.length, bytes });
      this.sealedEvents += read.lines.length;
      this.sealedBytes += bytes;
      this.nextSegment = segment + 1;
    }
    this.opened = true;
    if (torn > 0) this.count("dropped_torn", torn);
  }

  /** Add to a persisted counter; a storage that cannot save keeps the count in memory. */
  count(name: string, n = 1): void {
    this.counters[name] = (this.counters[name] ?? 0) + n;
    this.counted[name] = (this.counted[name] ?? 0) + n;
    try {
      if (this.opened) this.storage.saveCounters(this.counters);
    } catch {
      // The storage is failing; its own errors are reported where they happen.
    }
  }

  get pendingEvents(): number {
    return this.openEvents + this.sealedEvents;
  }

  get unsealedEvents(): number {
    return this.openEvents;
  }

  /** Append one event (a JSON document on one line); false (counted) when the queue is full. */
  put(line: string): boolean {
    const bytes = encoder.encode(line).length + 1;
    if (this.pendingEvents >= this.limits.maxEvents ||
        this.openBytes + this.sealedBytes + bytes > this.limits.maxBytes) {
      this.count("dropped_queue_full");
      return false;
    }
    const segment = this.openSegment >= 0 ? this.openSegment : this.nextSegment;
    this.storage.append(segment, line);
    if (this.openSegment < 0) {
      this.openSegment = segment;
      this.nextSegment = segment + 1;
      this.firstUnsealedAtMs = Date.now();
    }
    this.openEvents += 1;
    this.openBytes += bytes;
    return true;
  }

  /** Close the open segment into one the sender may send. */
  seal(): void {
    if (this.openSegment < 0) return;
    this.sizes.set(this.openSegment, { events: this.openEvents, bytes: this.openBytes });
    this.sealedEvents += this.openEvents;
    this.sealedBytes += this.openBytes;
    this.openSegment = -1;
    this.openEvents = this.openBytes = 0;
    this.firstUnsealedAtMs = null;
  }

  /** Sealed segments, oldest first. */
  sealed(): number[] {
    return [...this.sizes.keys()].sort((a, b) => a - b);
  }

  /** The events of a sealed segment. */
  read(segment: number): string[] {
    const { lines, torn } = this.storage.read(segment);
    if (torn > 0) this.count("dropped_torn", torn);
    return lines;
  }

  remove(segment: number): void {
    this.storage.remove(segment);
    const size = this.sizes.get(segment);
    if (size === undefined) return;
    this.sizes.delete(segment);
    this.sealedEvents -= size.events;
    this.sealedBytes -= size.bytes;
  }

  close(): void {
    if (!this.opened) return;
    this.opened = false;
    this.storage.close();
  }
}

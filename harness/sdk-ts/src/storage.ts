/**
 * Where the queue keeps events until ingest has taken them. The queue appends each event as one
 * line to the open segment and deletes a segment only once every event in it was delivered; a
 * new process reads whatever segments an earlier one left. Implementations: FileStorage (Node,
 * `@rewardstream/telemetry/node`), MemoryStorage (browsers and webviews, tests), or the host's
 * own over its storage (calls are synchronous, so `emit` knows the event is stored when it
 * returns true).
 */
export interface QueueStorage {
  /** Acquire the storage (create it, take its lock); throws when it cannot be used. */
  open(): void;
  /** Stored segment numbers, ascending. */
  list(): number[];
  /**
   * The whole lines of a segment. A last line cut short (a crash mid-write) is removed from the
   * storage and counted in ``torn``.
   */
  read(segment: number): { lines: string[]; torn: number };
  /** Append one line (no newline inside) to a segment, creating it; stored when this returns. */
  append(segment: number, line: string): void;
  remove(segment: number): void;
  /** Counters persisted across processes (drops); empty when none were saved. */
  loadCounters(): Record<string, number>;
  saveCounters(counters: Readonly<Record<string, number>>): void;
  /** Release the storage (its lock); what it holds stays for the next process. */
  close(): void;
}

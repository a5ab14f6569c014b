import type { QueueStorage } from "./storage.js";

/** Stored text as its whole lines and the torn tail (what follows the last newline). */
function splitLines(text: string): { lines: string[]; tail: string } {
  const end = text.lastIndexOf("\n") + 1;
  return { lines: text.slice(0, end).split("\n").filter((line) => line !== ""),
           tail: text.slice(end) };
}

/** What a MemoryStorage holds; share one between instances to model a restart. */
export interface MemoryState {
  readonly segments: Map<number, string>;
  counters: Record<string, number>;
}

/**
 * Queue storage in memory: for hosts without a file system (browsers, webviews) and for tests.
 * Events survive a new client on the same ``state`` but not the end of the page or process.
 */
export class MemoryStorage implements QueueStorage {
  constructor(readonly state: MemoryState = { segments: new Map(), counters: {} }) {}

  open(): void {}

  list(): number[] {
    return [...this.state.segments.keys()].sort((a, b) => a - b);
  }

  read(segment: number): { lines: string[]; torn: number } {
    const { lines, tail } = splitLines(this.state.segments.get(segment) ?? "");
    if (tail === "") return { lines, torn: 0 };
    this.state.segments.set(segment, this.state.segments.get(segment)!.slice(0, -tail.length));
    return { lines, torn: 1 };
  }

  append(segment: number, line: string): void {
    this.state.segments.set(segment, (this.state.segments.get(segment) ?? "") + line + "\n");
  }

  remove(segment: number): void {
    this.state.segments.delete(segment);
  }

  loadCounters(): Record<string, number> {
    return { ...this.state.counters };
  }

  saveCounters(counters: Readonly<Record<string, number>>): void {
    this.state.counters = { ...counters };
  }

  close(): void {}
}

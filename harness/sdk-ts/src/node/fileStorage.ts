import {
  closeSync, fsyncSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, truncateSync,
  unlinkSync, writeFileSync, writeSync,
} from "node:fs";
import { join } from "node:path";

import type { QueueStorage } from "../storage.js";

const SEGMENT = /^seg-(\d{12})\.ndjson$/;
const COUNTERS = "counters.json";
const LOCK = ".lock";

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"; // alive, someone else's
  }
}

/**
 * Queue storage in a directory of append-only segment files (``seg-<n>.ndjson``, one event per
 * line). ``append`` has written the line to the operating system when it returns, so a process
 * killed with SIGKILL loses nothing it queued (``fsync: true`` also survives a power cut).
 * A ``.lock`` file holding the owner's pid keeps two live processes off one directory; a lock
 * whose process is gone is taken over.
 */
export class FileStorage implements QueueStorage {
  private appendFd: number | null = null;
  private appendSegment = -1;
  private locked = false;

  constructor(readonly directory: string, private readonly options: { fsync?: boolean } = {}) {}

  private path(segment: number): string {
    return join(this.directory, `seg-${String(segment).padStart(12, "0")}.ndjson`);
  }

  open(): void {
    if (this.locked) return;
    mkdirSync(this.directory, { recursive: true });
    const lock = join(this.directory, LOCK);
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        writeFileSync(lock, String(process.pid), { flag: "wx" });
        this.locked = true;
        return;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      }
      const owner = Number(readFileSync(lock, "utf8"));
      if (Number.isInteger(owner) && owner > 0 && isAlive(owner)) {
        throw new Error(`queue directory ${this.directory} is in use by live process ${owner};` +
                        " give each process its own directory");
      }
      unlinkSync(lock); // left by a process that is gone
    }
    throw new Error(`cannot take the lock of queue directory ${this.directory}`);
  }

  list(): number[] {
    return readdirSync(this.directory).map((name) => SEGMENT.exec(name)?.[1])
      .filter((n): n is string => n !== undefined).map(Number).sort((a, b) => a - b);
  }

  read(segment: number): { lines: string[]; torn: number } {
    let data: Buffer;
    try {
      data = readFileSync(this.path(segment));
    } catch (error) {
      // Deleted by hand: nothing to send, and the queue moves on to the next segment.
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return { lines: [], torn: 0 };
      throw error;
    }
    const end = data.lastIndexOf(0x0a) + 1;
    const torn = end < data.length ? 1 : 0;
    if (torn) truncateSync(this.path(segment), end);
    const lines = data.subarray(0, end).toString("utf8").split("\n").filter((l) => l !== "");
    return { lines, torn };
  }

  append(segment: number, line: string): void {
    if (this.appendSegment !== segment) {
      this.closeAppend();
      this.appendFd = openSync(this.path(segment), "a");
      this.appendSegment = segment;
    }
    const record = Buffer.from(line + "\n", "utf8");
    for (let offset = 0; offset < record.length;) {
      offset += writeSync(this.appendFd!, record, offset);
    }
    if (this.options.fsync) fsyncSync(this.appendFd!);
  }

  remove(segment: number): void {
    if (segment === this.appendSegment) this.closeAppend();
    try {
      unlinkSync(this.path(segment));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    }
  }

  loadCounters(): Record<string, number> {
    try {
      const loaded = JSON.parse(readFileSync(join(this.directory, COUNTERS), "utf8")) as unknown;
      if (typeof loaded !== "object" || loaded === null) return {};
      return Object.fromEntries(Object.entries(loaded)
        .filter(([, v]) => Number.isInteger(v)).map(([k, v]) => [k, v as number]));
    } catch {
      return {}; // none yet, or a file cut short by a crash: counting starts again
    }
  }

  saveCounters(counters: Readonly<Record<string, number>>): void {
    const tmp = join(this.directory, COUNTERS + ".tmp");
    writeFileSync(tmp, JSON.stringify(counters));
    renameSync(tmp, join(this.directory, COUNTERS)); // readers never see half a file
  }

  close(): void {
    this.closeAppend();
    if (this.locked) {
      this.locked = false;
      unlinkSync(join(this.directory, LOCK));
    }
  }

  private closeAppend(): void {
    if (this.appendFd !== null) closeSync(this.appendFd);
    this.appendFd = null;
    this.appendSegment = -1;
  }
}

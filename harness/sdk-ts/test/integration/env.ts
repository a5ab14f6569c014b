/**
 * What the tests against the real ingest are given by tests/integration/test_sdk_ts.py, which
 * starts ingest on the real broker and afterwards reads the topic back: the ingest URL and key,
 * and a directory for each test's result (the ids it had accepted, the client's stats).
 */

import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import type { TelemetryStats } from "../../src/index.js";

export interface IngestEnv {
  readonly url: string;
  readonly key: string;
  readonly resultsDir: string;
}

export const INGEST: IngestEnv | null =
  process.env["RS_INGEST_URL"] && process.env["RS_INGEST_KEY"] && process.env["RS_RESULTS_DIR"]
    ? { url: process.env["RS_INGEST_URL"], key: process.env["RS_INGEST_KEY"],
        resultsDir: process.env["RS_RESULTS_DIR"] }
    : null;

export const NEEDS_INGEST = INGEST === null
  ? "needs RS_INGEST_URL, RS_INGEST_KEY, RS_RESULTS_DIR: run by tests/integration/test_sdk_ts.py"
  : false;

export function writeResult(name: string, ids: readonly (string | null)[],
                            stats: TelemetryStats): void {
  writeFileSync(join(INGEST!.resultsDir, `${name}.json`), JSON.stringify({ ids, stats }));
}

export function queueDir(): string {
  return mkdtempSync(join(tmpdir(), "rs-ts-queue-"));
}

export function sleepMs(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

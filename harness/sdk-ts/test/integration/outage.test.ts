/**
 * The broker goes away mid-run. tests/integration/test_sdk_ts.py owns a private broker and
 * drives the outage through files in RS_OUTAGE_CONTROL_DIR: this side writes ``phase1-sent``
 * and ``retrying``; the other side stops the broker, writes ``broker-stopped``, and starts the
 * broker again once it sees ``retrying``.
 */

import assert from "node:assert/strict";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import test from "node:test";

import { Telemetry } from "../../src/index.js";
import { FileStorage } from "../../src/node/index.js";
import { emitOneOfEach, TRAJECTORY } from "../support/events.js";
import { INGEST, NEEDS_INGEST, queueDir, sleepMs, writeResult } from "./env.js";

const CONTROL = process.env["RS_OUTAGE_CONTROL_DIR"];

async function until(what: string, ready: () => boolean, timeoutMs: number): Promise<void> {
  const deadlineMs = Date.now() + timeoutMs;
  while (!ready()) {
    assert.ok(Date.now() < deadlineMs, `no ${what} within ${timeoutMs} ms`);
    await sleepMs(50);
  }
}

test("with the broker stopped mid-run, every event is delivered once it is back",
     { skip: NEEDS_INGEST || (CONTROL ? false : "needs RS_OUTAGE_CONTROL_DIR") }, async () => {
  const tel = new Telemetry(INGEST!.url, INGEST!.key, {
    storage: new FileStorage(queueDir()), batchSize: 20, lingerMs: 50, backoffBaseMs: 100,
    backoffCapMs: 2000, onError: () => {},
  });
  const rounds = (n: number, phase: string): (string | null)[] =>
    Array.from({ length: n }, (_, i) => emitOneOfEach(tel, {
      ...TRAJECTORY, trajectory_id: `traj-ts-${phase}-${i}` })).flat();
  const ids = rounds(5, "before");
  assert.ok(await tel.flush(30_000));
  writeFileSync(join(CONTROL!, "phase1-sent"), "");
  await until("broker-stopped", () => existsSync(join(CONTROL!, "broker-stopped")), 120_000);
  ids.push(...rounds(10, "during"));
  await until("a retry", () => tel.stats().retries > 0, 60_000);
  writeFileSync(join(CONTROL!, "retrying"), "");
  assert.ok(await tel.close(120_000));
  const stats = tel.stats();
  writeResult("broker-outage", ids, stats);
  assert.ok(ids.every((id) => id !== null));
  assert.equal(stats.sent + stats.duplicates, ids.length);
  assert.equal(stats.queued, 0);
  assert.ok(stats.retries > 0);
});

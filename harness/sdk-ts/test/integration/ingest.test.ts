import assert from "node:assert/strict";
import test from "node:test";

import { Telemetry } from "../../src/index.js";
import { FileStorage } from "../../src/node/index.js";
import { emitOneOfEach, TRAJECTORY } from "../support/events.js";
import { INGEST, NEEDS_INGEST, queueDir, writeResult } from "./env.js";

const ROUNDS = 250; // of one event per type: 2,000 events

test(`${ROUNDS * 8} events of every type reach the real ingest, all accepted`,
     { skip: NEEDS_INGEST }, async () => {
  const dir = queueDir();
  const tel = new Telemetry(INGEST!.url, INGEST!.key, { storage: new FileStorage(dir),
                                                         batchSize: 200, lingerMs: 20 });
  const ids = Array.from({ length: ROUNDS }, (_, round) => emitOneOfEach(tel, {
    ...TRAJECTORY, trajectory_id: `traj-ts-${round % 25}` })).flat();
  assert.ok(ids.every((id) => id !== null));
  assert.ok(await tel.flush(60_000));
  assert.ok(await tel.close());
  const stats = tel.stats();
  writeResult("n-events", ids, stats);
  assert.deepEqual([stats.sent, stats.duplicates, stats.rejected, stats.queued],
                   [ids.length, 0, 0, 0]);
  const next = new Telemetry(INGEST!.url, INGEST!.key, { storage: new FileStorage(dir) });
  assert.equal(next.stats().queued, 0); // nothing left behind for a later process
  await next.close();
});

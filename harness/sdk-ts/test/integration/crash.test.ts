import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createServer } from "node:net";
import { once } from "node:events";
import { createInterface } from "node:readline";
import test from "node:test";

import { Telemetry } from "../../src/index.js";
import { FileStorage } from "../../src/node/index.js";
import { INGEST, NEEDS_INGEST, queueDir, writeResult } from "./env.js";

const CHILD = new URL("./crashChild.js", import.meta.url).pathname;
const QUEUED = 40;

async function deadUrl(): Promise<string> {
  const server = createServer().listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as { port: number };
  server.close();
  return `http://127.0.0.1:${port}`;
}

test("events queued by a process killed with SIGKILL are sent by the next process",
     { skip: NEEDS_INGEST }, async () => {
  const dir = queueDir();
  const child = spawn(process.execPath, [CHILD, await deadUrl(), INGEST!.key, dir,
                                         String(QUEUED)], { stdio: ["ignore", "pipe", "inherit"] });
  const [line] = await once(createInterface({ input: child.stdout! }), "line") as [string];
  const queued = JSON.parse(line) as string[];
  child.kill("SIGKILL");
  await once(child, "exit");
  assert.equal(queued.length, QUEUED);

  const tel = new Telemetry(INGEST!.url, INGEST!.key, { storage: new FileStorage(dir) });
  assert.equal(tel.stats().queued, QUEUED);
  assert.ok(await tel.close(60_000));
  const stats = tel.stats();
  writeResult("killed-process", queued, stats);
  assert.deepEqual([stats.sent, stats.queued, stats.droppedTorn], [QUEUED, 0, 0]);
});

/**
 * The TypeScript side of the producer-parity test (tests/integration/test_sdk_ts.py): sends the
 * trajectory described in a JSON file through the typed constructors and prints the event ids.
 * Usage: node parityProducer.js URL KEY QUEUE_DIR TRAJECTORY_JSON
 */

import { readFileSync } from "node:fs";

import { type EventType, type Trajectory, Telemetry } from "../../src/index.js";
import { FileStorage } from "../../src/node/index.js";
import { constructorName } from "../../scripts/generate-events.js";

interface Script {
  trajectory: Trajectory;
  events: { type: EventType; payload: Record<string, unknown> }[];
}

const [url, key, dir, file] = process.argv.slice(2) as [string, string, string, string];
const script = JSON.parse(readFileSync(file, "utf8")) as Script;
const tel = new Telemetry(url, key, { storage: new FileStorage(dir), lingerMs: 20 });
const constructors = tel as unknown as Record<string, (t: Trajectory, p: unknown) => string>;
const ids = script.events.map(({ type, payload }) =>
  constructors[constructorName(type)]!.call(tel, script.trajectory, payload));
const flushed = await tel.close(30_000);
process.stdout.write(JSON.stringify({ ids, flushed, stats: tel.stats() }) + "\n");

/**
 * A separate process for the crash test: queues ``count`` events for an ingest that is not
 * there, prints their ids, and waits to be killed.
 */

import { Telemetry } from "../../src/index.js";
import { FileStorage } from "../../src/node/index.js";
import { TRAJECTORY } from "../support/events.js";

const [url, key, dir, count] = process.argv.slice(2) as [string, string, string, string];
const tel = new Telemetry(url, key, { storage: new FileStorage(dir), lingerMs: 20,
                                      backoffBaseMs: 50, backoffCapMs: 500, onError: () => {} });
const ids = Array.from({ length: Number(count) }, (_, i) => tel.toolCalled(
  { ...TRAJECTORY, trajectory_id: "traj-ts-crash" }, { call_id: `c${i}`, tool: "read_file",
                                                      valid: true }));
process.stdout.write(JSON.stringify(ids) + "\n");
setInterval(() => {}, 60_000); // holding unsent events until SIGKILL

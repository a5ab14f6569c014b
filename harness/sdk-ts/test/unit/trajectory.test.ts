import assert from "node:assert/strict";
import test from "node:test";

import { trajectoryFromTraceparent } from "../../src/trajectory.js";

const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";

test("a traceparent names the trajectory as the gateway and OTLP ingest name its trace", () => {
  const traj = trajectoryFromTraceparent(`00-${TRACE}-00f067aa0ba902b7-01`, {
    user: "dev-1",
    checkpoint_id: "ckpt-7",
  });
  assert.deepEqual(traj, {
    trajectory_id: TRACE,
    session_id: TRACE,
    user: "dev-1",
    checkpoint_id: "ckpt-7",
    arm: "default",
  });
  const later = trajectoryFromTraceparent(`01-${TRACE}-00f067aa0ba902b7-00-more`, {
    user: "dev-1",
    checkpoint_id: "c",
    session_id: "s",
    arm: "canary",
  });
  assert.equal(later.trajectory_id, TRACE);
  assert.equal(later.session_id, "s");
});

test("an invalid traceparent throws, as W3C says it must not be guessed at", () => {
  for (const bad of [
    "",
    "garbage",
    `ff-${TRACE}-00f067aa0ba902b7-01`,
    `00-${"0".repeat(32)}-00f067aa0ba902b7-01`,
    `00-${TRACE}-${"0".repeat(16)}-01`,
    `00-${TRACE.toUpperCase()}-00f067aa0ba902b7-01`,
    `00-${TRACE}-00f067aa0ba902b7-01-extra`,
  ]) {
    assert.throws(() => trajectoryFromTraceparent(bad, { user: "u", checkpoint_id: "c" }), TypeError);
  }
});

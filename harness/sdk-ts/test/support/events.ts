/** Example payloads of every event type, and a way to emit one of each. */

import {
  EVENT_TYPES, type EventType, type PayloadOf, type Telemetry, type Trajectory,
} from "../../src/index.js";

export const TRAJECTORY: Trajectory = {
  trajectory_id: "traj-ts", session_id: "session-ts", user: "user-7", checkpoint_id: "ckpt-3",
  arm: "treatment",
};

export const PAYLOADS: { readonly [T in EventType]: PayloadOf[T] } = {
  "clarification.asked": { request_ambiguity: 0.3 },
  "completion.served": {
    completion_id: "c0", model: "tiny", prompt_token_ids: [1, 2], completion_token_ids: [3, 4],
    behaviour_logprobs: [-0.1, -2.5], ttft_ms: 5, latency_ms: 9.5,
    sampling: { temperature: 0.7, seed: 11 },
  },
  "edit.decided": { edit_id: "e0", decision: "accepted" },
  "edit.persistence": { edit_id: "e0", horizon_s: 600, surviving_fraction: 0.5 },
  "edit.proposed": { edit_id: "e0", path: "src/app.py", lines_added: 2 },
  "followup.sent": { sentiment: "neutral" },
  "tool.called": { call_id: "t0", tool: "edit_file", valid: false, error_kind: "malformed_call" },
  "trajectory.ended": { outcome: "completed", turns: 2 },
};

/** One event of each type through its typed constructor; the ids, null for any not queued. */
export function emitOneOfEach(
  tel: Telemetry, trajectory: Trajectory = TRAJECTORY,
): (string | null)[] {
  return EVENT_TYPES.map((type) => {
    switch (type) {
      case "clarification.asked": return tel.clarificationAsked(trajectory, PAYLOADS[type]);
      case "completion.served": return tel.completionServed(trajectory, PAYLOADS[type]);
      case "edit.decided": return tel.editDecided(trajectory, PAYLOADS[type]);
      case "edit.persistence": return tel.editPersistence(trajectory, PAYLOADS[type]);
      case "edit.proposed": return tel.editProposed(trajectory, PAYLOADS[type]);
      case "followup.sent": return tel.followupSent(trajectory, PAYLOADS[type]);
      case "tool.called": return tel.toolCalled(trajectory, PAYLOADS[type]);
      case "trajectory.ended": return tel.trajectoryEnded(trajectory, PAYLOADS[type]);
    }
  });
}

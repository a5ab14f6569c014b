import assert from "node:assert/strict";
import test from "node:test";

import {
  EVENT_SCHEMAS, EVENT_TYPES, type EventType, SCHEMA_VERSIONS, uuid7,
} from "../../src/index.js";
import { validate, withDefaults } from "../../src/schema.js";
import { PAYLOADS, TRAJECTORY } from "../support/events.js";

function event(type: EventType, changes: Record<string, unknown> = {}): Record<string, unknown> {
  const at = "2025-01-31T12:00:00.123Z";
  return withDefaults(EVENT_SCHEMAS[type], {
    event_id: uuid7(), type, ...TRAJECTORY, occurred_at: at, sent_at: at,
    payload: PAYLOADS[type], ...changes,
  });
}

function problem(type: EventType, changes: Record<string, unknown>): string | null {
  return validate(EVENT_SCHEMAS[type], event(type, changes));
}

test("an event of every type made from the example payloads is valid", () => {
  for (const type of EVENT_TYPES) assert.equal(validate(EVENT_SCHEMAS[type], event(type)), null);
});

test("defaults are filled as the Python SDK writes them, nested ones too", () => {
  const served = event("completion.served");
  assert.equal(served["arm"], "treatment");
  assert.equal(served["org_id"], null);
  assert.equal(served["schema_version"], SCHEMA_VERSIONS["completion.served"]);
  assert.deepEqual((served["payload"] as Record<string, unknown>)["sampling"],
                   { temperature: 0.7, seed: 11, max_tokens: 256, top_k: -1, top_p: 1 });
  const tool = event("tool.called", { arm: undefined });
  assert.equal(tool["arm"], "default");
  assert.deepEqual(tool["payload"], { ...PAYLOADS["tool.called"], duration_ms: 0,
                                      parallel_group: null });
});

test("each problem names the field and says what is wrong", () => {
  const served = PAYLOADS["completion.served"];
  const cases: [EventType, Record<string, unknown>, string][] = [
    ["trajectory.ended", { payload: { outcome: "completed", turns: -1 } },
     "payload.turns: must be >= 0"],
    ["trajectory.ended", { payload: { outcome: "done", turns: 1 } },
     'payload.outcome: must be one of "completed", "aborted", "error", got "done"'],
    ["trajectory.ended", { payload: { outcome: "completed", turns: 1.5 } },
     "payload.turns: must be an integer, got 1.5"],
    ["completion.served", { payload: { ...served, behaviour_logprobs: [-0.1, 0.2] } },
     "payload.behaviour_logprobs.1: must be <= 0"],
    ["completion.served", { payload: { ...served, ttft_ms: Number.NaN } },
     "payload.ttft_ms: must be a finite number, got NaN"],
    ["completion.served", { payload: { ...served, sampling: { top_p: 0 } } },
     "payload.sampling.top_p: must be > 0"],
    ["edit.decided", { payload: { decision: "accepted" } }, "payload.edit_id: is required"],
    ["edit.decided", { payload: { edit_id: "", decision: "accepted" } },
     "payload.edit_id: must have at least 1 character"],
    ["edit.decided", { payload: { edit_id: "e", decision: "accepted", why: "x" } },
     "payload.why: unknown field"],
    ["edit.decided", { trajectory_id: "t".repeat(129) },
     "trajectory_id: must have at most 128 characters"],
    ["followup.sent", { org_id: 7 }, "org_id: must be a string, got 7"],
    ["followup.sent", { occurred_at: "2025-01-31T12:00:00" },
     "occurred_at: must be an ISO-8601 date-time with a time zone"],
    ["followup.sent", { event_id: "not-a-uuid" }, "event_id: must be a UUID"],
    ["followup.sent", { type: "tool.called" }, 'type: must be "followup.sent"'],
    ["clarification.asked", { payload: { request_ambiguity: 1.5 } },
     "payload.request_ambiguity: must be <= 1"],
  ];
  for (const [type, changes, expected] of cases) {
    assert.equal(problem(type, changes), expected, JSON.stringify(changes));
  }
});

test("nullable fields take null and their kind, and refuse anything else", () => {
  assert.equal(problem("clarification.asked", { payload: { request_ambiguity: null } }), null);
  assert.equal(problem("tool.called", { payload: { ...PAYLOADS["tool.called"],
                                                   error_kind: "nonsense" } }),
               "payload.error_kind: must be one of \"malformed_call\", \"unknown_tool\", " +
               "\"bad_arguments\", \"timeout\", \"sandbox_violation\", \"tool_error\", " +
               "got \"nonsense\"");
  assert.equal(problem("edit.decided", { user: null }), "user: must be a string, got null");
});

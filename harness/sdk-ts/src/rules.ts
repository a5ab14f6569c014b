/**
 * The rules that the ingest enforces and JSON Schema cannot say; checked before queueing so such
 * an event is refused at the call rather than dead-lettered later.
 */

import type { Event } from "./generated/events.js";
import { isUuid7 } from "./ids.js";

const ENVELOPE_IDS = ["trajectory_id", "session_id", "user", "checkpoint_id", "arm"] as const;
// Ids and names become Kafka keys, reward keys, file names and log lines at the platform.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

function controlCharacterProblem(event: Event): string | null {
  const named: [string, unknown][] = [
    ...ENVELOPE_IDS.map((name): [string, unknown] => [name, event[name]]),
    ...Object.entries(event.payload).map(([name, value]): [string, unknown] =>
      [`payload.${name}`, value]),
  ];
  for (const [name, value] of named) {
    const found = typeof value === "string" ? CONTROL.exec(value) : null;
    if (found !== null) {
      const code = found[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, "0");
      return `${name}: contains the control character U+${code} at index ${found.index}; ` +
        "ids and names must be printable";
    }
  }
  return null;
}

export function crossFieldProblem(event: Event): string | null {
  if (!isUuid7(event.event_id)) {
    return `event_id: must be a UUIDv7 (the ingest's idempotency key), got ${event.event_id}`;
  }
  const unprintable = controlCharacterProblem(event);
  if (unprintable !== null) return unprintable;
  if (event.type === "completion.served") {
    const { behaviour_logprobs: logprobs, completion_token_ids: tokens } = event.payload;
    if (logprobs.length !== tokens.length) {
      return `payload.behaviour_logprobs: has ${logprobs.length} entries but ` +
        `completion_token_ids has ${tokens.length}; they must match`;
    }
  }
  if (event.type === "tool.called" && !event.payload.valid && event.payload.error_kind == null) {
    return "payload.error_kind: an invalid tool call (valid=false) needs an error_kind";
  }
  return null;
}

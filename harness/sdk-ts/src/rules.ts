/**
 * The rules across fields that the ingest's models enforce and JSON Schema cannot say; checked
 * before queueing so such an event is refused at the call rather than dead-lettered later.
 */

import type { Event } from "./generated/events.js";
import { isUuid7 } from "./ids.js";

export function crossFieldProblem(event: Event): string | null {
  if (!isUuid7(event.event_id)) {
    return `event_id: must be a UUIDv7 (the ingest's idempotency key), got ${event.event_id}`;
  }
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

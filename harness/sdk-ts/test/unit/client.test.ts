import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "node:test";

import {
  EVENT_SCHEMAS, EVENT_TYPES, type MemoryState, MemoryStorage, Telemetry, type TelemetryError,
  type TelemetryOptions, uuid7, uuid7TimeMs,
} from "../../src/index.js";
import { FileStorage } from "../../src/node/index.js";
import { validate } from "../../src/schema.js";
import { emitOneOfEach, TRAJECTORY } from "../support/events.js";
import { type Answer, acceptAll, startFakeIngest } from "../support/fakeIngest.js";

const KEY = "rsk_unit-test";
const QUICK: Partial<TelemetryOptions> = { lingerMs: 10, backoffBaseMs: 10, backoffCapMs: 50 };

function client(url: string, options: Partial<TelemetryOptions> = {}): {
  tel: Telemetry; errors: TelemetryError[];
} {
  const errors: TelemetryError[] = [];
  const tel = new Telemetry(url, KEY, { storage: new MemoryStorage(), ...QUICK,
                                        onError: (e) => errors.push(e), ...options });
  return { tel, errors };
}

function toolCalls(tel: Telemetry, n: number): (string | null)[] {
  return Array.from({ length: n }, (_, i) => tel.toolCalled(TRAJECTORY, {
    call_id: `c${i}`, tool: "read_file", valid: true }));
}

/** A URL where nothing listens. */
async function deadUrl(): Promise<string> {
  const fake = await startFakeIngest();
  await fake.close();
  return fake.url;
}

test("a batch is gzip'd NDJSON with the bearer key; every typed event arrives valid", async () => {
  const ingest = await startFakeIngest();
  const { tel } = client(ingest.url + "/");
  const ids = emitOneOfEach(tel);
  assert.ok(await tel.flush(5000));
  await tel.close();
  await ingest.close();
  assert.equal(ingest.batches.length, 1);
  const [{ headers, events }] = ingest.batches as [typeof ingest.batches[0]];
  assert.equal(headers["content-type"], "application/x-ndjson");
  assert.equal(headers["content-encoding"], "gzip");
  assert.equal(headers["authorization"], `Bearer ${KEY}`);
  assert.deepEqual(events.map((e) => e["event_id"]), ids);
  assert.deepEqual(events.map((e) => e["type"]), EVENT_TYPES);
  for (const event of events) {
    assert.equal(validate(EVENT_SCHEMAS[event["type"] as "tool.called"], event), null);
    assert.match(event["occurred_at"], /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    assert.equal(uuid7TimeMs(event["event_id"]), Date.parse(event["occurred_at"]));
    assert.ok(Date.parse(event["sent_at"]) >= Date.parse(event["occurred_at"]));
    assert.equal(event["sent_at"], events[0]!["sent_at"]); // stamped per attempt
    assert.equal(event["arm"], "treatment");
  }
  assert.equal(tel.stats().sent, 8);
});

test("events go in batches of at most batchSize, in the order they were emitted", async () => {
  const ingest = await startFakeIngest();
  const { tel } = client(ingest.url, { batchSize: 10 });
  const ids = toolCalls(tel, 25);
  assert.ok(await tel.flush(5000));
  await tel.close();
  await ingest.close();
  assert.ok(ingest.batches.every((b) => b.events.length <= 10), "a batch over batchSize");
  assert.deepEqual(ingest.batches.flatMap((b) => b.events.map((e) => e["event_id"])), ids);
});

test("413 halves a batch until it fits; one event still too large is dropped, counted",
     async () => {
  const ingest = await startFakeIngest((events) =>
    events.length > 3 || events.some((e) => e["payload"]["tool"] === "huge")
      ? { status: 413 } : acceptAll(events));
  const { tel, errors } = client(ingest.url, { batchSize: 10 });
  const ids = toolCalls(tel, 10);
  assert.ok(await tel.flush(5000));
  const delivered = ingest.batches.filter((b) => b.events.length <= 3);
  assert.deepEqual(delivered.flatMap((b) => b.events.map((e) => e["event_id"])), ids);
  assert.deepEqual(ingest.batches.map((b) => b.events.length), [10, 5, 2, 3, 5, 2, 3]);
  tel.toolCalled(TRAJECTORY, { call_id: "big", tool: "huge", valid: true });
  assert.ok(await tel.flush(5000));
  await tel.close();
  await ingest.close();
  assert.equal(tel.stats().sent, 10);
  assert.equal(tel.stats().droppedUndeliverable, 1);
  assert.equal(tel.stats().retries, 0);
  assert.ok(errors.some((e) => e.kind === "undeliverable" && /413/.test(e.message)));
});

for (const status of [400, 401, 404, 415]) {
  test(`a ${status} is never retried: the batch is dropped and counted`, async () => {
    const ingest = await startFakeIngest(() => ({ status, body: { detail: "no" } }));
    const { tel, errors } = client(ingest.url);
    toolCalls(tel, 3);
    assert.ok(await tel.flush(5000));
    await tel.close();
    await ingest.close();
    assert.equal(ingest.batches.length, 1);
    assert.equal(tel.stats().droppedUndeliverable, 3);
    assert.equal(tel.stats().retries, 0);
    assert.ok(errors.some((e) => e.kind === "undeliverable" && e.message.includes(`${status}`)));
  });
}

test("429 with Retry-After is waited out, then the same events are sent again", async () => {
  const ingest = await startFakeIngest((events, request): Answer => request === 0
    ? { status: 429, headers: { "retry-after": "1" }, body: { detail: "slow down" } }
    : acceptAll(events));
  const { tel } = client(ingest.url);
  const ids = toolCalls(tel, 2);
  assert.ok(await tel.flush(10_000));
  await tel.close();
  await ingest.close();
  const [first, second] = ingest.batches;
  assert.ok(second!.atMs - first!.atMs >= 1000, `resent after ${second!.atMs - first!.atMs} ms`);
  assert.deepEqual(second!.events.map((e) => e["event_id"]), ids);
  assert.deepEqual(first!.events.map((e) => e["event_id"]), ids);
  assert.notEqual(second!.events[0]!["sent_at"], first!.events[0]!["sent_at"]);
  assert.equal(tel.stats().retries, 1);
  assert.equal(tel.stats().sent, 2);
});

test("5xx and 408 are retried with backoff until ingest takes the batch", async () => {
  const statuses = [503, 500, 408];
  const ingest = await startFakeIngest((events, request): Answer =>
    request < statuses.length ? { status: statuses[request]! } : acceptAll(events));
  const { tel } = client(ingest.url);
  toolCalls(tel, 2);
  assert.ok(await tel.flush(5000));
  await tel.close();
  await ingest.close();
  assert.equal(ingest.batches.length, 4);
  assert.equal(tel.stats().retries, 3);
  assert.equal(tel.stats().sent, 2);
});

test("a batch still failing after retryMaxAttempts is dropped, counted, stored with the queue",
     async () => {
  const ingest = await startFakeIngest(() => ({ status: 503, body: { detail: "no Kafka" } }));
  const dir = mkdtempSync(join(tmpdir(), "rs-gave-up-"));
  const { tel, errors } = client(ingest.url, { storage: new FileStorage(dir),
                                               retryMaxAttempts: 3 });
  toolCalls(tel, 4);
  assert.ok(await tel.flush(5000)); // nothing left: the batch was given up
  assert.equal(await tel.close(), false); // but events were lost
  assert.equal(ingest.batches.length, 3);
  assert.deepEqual([tel.stats().droppedGaveUp, tel.stats().retries, tel.stats().queued],
                   [4, 2, 0]);
  const [gaveUp] = errors.filter((e) => e.kind === "gave_up");
  assert.match(gaveUp!.message, /ingest answered 503; retry budget \(3 attempts, 900 s\) spent /);
  const next = client(ingest.url, { storage: new FileStorage(dir) }); // a later process
  assert.equal(next.tel.stats().droppedGaveUp, 0); // its own counts start at zero
  assert.ok(await next.tel.close(1000));
  assert.equal(new FileStorage(dir).loadCounters()["dropped_gave_up"], 4); // the stored sum
  await ingest.close();
  rmSync(dir, { recursive: true });
});

test("a retry whose wait would pass retryBudgetMs is not started", async () => {
  const ingest = await startFakeIngest(() => ({ status: 429, headers: { "retry-after": "5" } }));
  const unreachable = client(await deadUrl(), { retryBudgetMs: 300 });
  const { tel } = client(ingest.url, { retryBudgetMs: 2000 });
  toolCalls(tel, 2);
  toolCalls(unreachable.tel, 3);
  const startedMs = Date.now();
  assert.ok(await tel.flush(5000));
  assert.ok(await unreachable.tel.flush(5000));
  assert.ok(Date.now() - startedMs < 2000, "waited out a Retry-After beyond the budget");
  await Promise.all([tel.close(), unreachable.tel.close()]);
  await ingest.close();
  assert.deepEqual([ingest.batches.length, tel.stats().droppedGaveUp, tel.stats().retries],
                   [1, 2, 0]);
  assert.equal(unreachable.tel.stats().droppedGaveUp, 3); // backoff 10-50 ms: a few tries first
  assert.ok(unreachable.tel.stats().retries > 0);
});

test("ingest's rejections (207, and 403 for a key without the type) count as rejected",
     async () => {
  const ingest = await startFakeIngest((events, request): Answer => {
    const rejected = events.slice(1).map((e, i) => ({ index: i + 1, event_id: e["event_id"],
      kind: "type_not_allowed", field: "type", reason: "not allowed" }));
    return request === 0
      ? { status: 207, body: { accepted: [events[0]!["event_id"]], duplicates: [], rejected } }
      : { status: 403, body: { accepted: [], duplicates: [], rejected: [...rejected, {}] } };
  });
  const { tel, errors } = client(ingest.url);
  toolCalls(tel, 3);
  assert.ok(await tel.flush(5000));
  toolCalls(tel, 2);
  assert.ok(await tel.flush(5000));
  await tel.close();
  await ingest.close();
  assert.deepEqual([tel.stats().sent, tel.stats().rejected, tel.stats().retries], [1, 4, 0]);
  assert.ok(errors.some((e) => e.kind === "rejected" && e.message.includes("not allowed")));
});

test("ingest unreachable: flush gives up at its timeout; the next client sends the events",
     async () => {
  const state: MemoryState = { segments: new Map(), counters: {} };
  const down = client(await deadUrl(), { storage: new MemoryStorage(state) });
  const ids = toolCalls(down.tel, 3);
  const startedMs = Date.now();
  assert.equal(await down.tel.flush(300), false);
  assert.ok(Date.now() - startedMs < 2000);
  assert.equal(await down.tel.close(100), false);
  assert.equal(down.tel.stats().queued, 3);
  assert.ok(down.tel.stats().retries > 0);
  assert.ok(down.errors.some((e) => e.kind === "network"));

  const ingest = await startFakeIngest();
  const { tel } = client(ingest.url, { storage: new MemoryStorage(state) });
  for (let i = 0; i < 200 && ingest.batches.length === 0; i++) await sleepMs(10);
  assert.deepEqual(ingest.batches[0]?.events.map((e) => e["event_id"]), ids); // without a flush
  assert.ok(await tel.close(5000));
  await ingest.close();
});

test("emit with a broken storage returns false and counts; nothing throws", async () => {
  class FullDisk extends MemoryStorage {
    override append(): void {
      throw new Error("ENOSPC: no space left on device");
    }
  }
  const { tel, errors } = client(await deadUrl(), { storage: new FullDisk() });
  const now = new Date().toISOString();
  assert.equal(tel.emit({ ...TRAJECTORY, type: "followup.sent", event_id: uuid7(),
                          occurred_at: now, sent_at: now, payload: { sentiment: "satisfied" } }),
               false);
  assert.equal(tel.followupSent(TRAJECTORY, { sentiment: "neutral" }), null);
  assert.equal(tel.stats().droppedStorage, 2);
  assert.ok(errors.every((e) => e.kind === "storage") && /ENOSPC/.test(errors[0]!.message));
  assert.ok(await tel.flush(100));
  assert.equal(await tel.close(100), false);

  const dir = mkdtempSync(join(tmpdir(), "rs-broken-"));
  writeFileSync(join(dir, "file"), "not a directory");
  const unusable = client(await deadUrl(), { storage: new FileStorage(join(dir, "file", "q")) });
  assert.equal(unusable.tel.toolCalled(TRAJECTORY, { call_id: "c", tool: "t", valid: true }), null);
  assert.equal(unusable.tel.stats().droppedStorage, 1);
  assert.match(unusable.errors[0]!.message, /cannot open the queue storage/);
  assert.equal(await unusable.tel.close(100), false);
  rmSync(dir, { recursive: true });
});

test("an invalid event is refused at the call, counted, and named by field", async () => {
  const { tel, errors } = client(await deadUrl());
  assert.equal(tel.toolCalled(TRAJECTORY, { call_id: "", tool: "t", valid: true }), null);
  assert.equal(tel.toolCalled(TRAJECTORY, { call_id: "c", tool: "t", valid: false }), null);
  assert.equal(tel.completionServed(TRAJECTORY, { completion_id: "c", model: "m",
    prompt_token_ids: [], completion_token_ids: [1, 2], behaviour_logprobs: [-1], ttft_ms: 1,
    latency_ms: 2 }), null);
  assert.equal(tel.toolCalled({ ...TRAJECTORY, trajectory_id: "traj\u0000" },
                              { call_id: "c", tool: "t", valid: true }), null);
  assert.equal(tel.editProposed(TRAJECTORY, { edit_id: "e", path: "src/a.ts\n" }), null);
  const now = new Date().toISOString();
  assert.equal(tel.emit({ ...TRAJECTORY, type: "followup.sent", occurred_at: now, sent_at: now,
                          event_id: "6f9619ff-8b86-4d01-b42d-00c04fc964ff", // a version 4
                          payload: { sentiment: "neutral" } }), false);
  assert.equal(tel.emit({ type: "nope" } as never), false);
  assert.equal(tel.emit(null as never), false);
  assert.equal(tel.stats().droppedInvalid, 8);
  assert.deepEqual(errors.map((e) => e.message.split(":")[0]), [
    "tool.called payload.call_id", "tool.called payload.error_kind",
    "completion.served payload.behaviour_logprobs", "tool.called trajectory_id",
    "edit.proposed payload.path", "followup.sent event_id", "type", "type",
  ]);
  assert.match(errors[3]!.message, /control character U\+0000 at index 4; ids and names must/);
  assert.equal(await tel.close(100), false); // what was dropped is not a clean close

});

test("a full queue refuses events and counts them", async () => {
  const { tel, errors } = client(await deadUrl(), { maxQueueEvents: 2 });
  assert.deepEqual(toolCalls(tel, 3).map((id) => id !== null), [true, true, false]);
  assert.equal(tel.stats().droppedQueueFull, 1);
  assert.ok(errors.some((e) => e.kind === "queue_full"));
  await tel.close(50);
});

test("emit after close is refused and counted; a failing onError never reaches the host",
     async () => {
  const tel = new Telemetry(await deadUrl(), KEY, { storage: new MemoryStorage(), ...QUICK,
    onError: () => { throw new Error("the host's handler is broken"); } });
  await tel.close(50);
  assert.equal(tel.followupSent(TRAJECTORY, { sentiment: "neutral" }), null);
  assert.equal(tel.stats().droppedClosed, 1);
  assert.equal(await tel.close(50), true); // closing again answers the first close
});

test("occurredAt takes a Date or an ISO-8601 string with a zone, kept to the millisecond",
     async () => {
  const ingest = await startFakeIngest();
  const { tel } = client(ingest.url);
  const given: [Date | string, string][] = [
    [new Date("2025-01-31T12:00:00.123Z"), "2025-01-31T12:00:00.123Z"],
    ["2025-01-31T12:00:00.123Z", "2025-01-31T12:00:00.123Z"],
    ["2025-01-31T14:00:00+02:00", "2025-01-31T12:00:00.000Z"],
    ["2025-01-31t12:00:00.123456z", "2025-01-31T12:00:00.123Z"],
  ];
  const ids = given.map(([when]) => tel.followupSent(TRAJECTORY, { sentiment: "neutral" }, when));
  assert.ok(await tel.close(5000));
  await ingest.close();
  const events = ingest.batches.flatMap((b) => b.events);
  assert.deepEqual(events.map((e) => e["event_id"]), ids);
  assert.deepEqual(events.map((e) => e["occurred_at"]), given.map(([, written]) => written));
  for (const event of events) {
    assert.equal(uuid7TimeMs(event["event_id"]), Date.parse(event["occurred_at"]));
  }
});

test("any other occurredAt throws at the call, naming the field; nothing is queued", async () => {
  const { tel, errors } = client(await deadUrl());
  const wrong: unknown[] = [1738324800000, "2025-01-31T12:00:00", "yesterday", "2025-02-30T00:00:00Z",
                            new Date(Number.NaN), {}, null];
  for (const when of wrong) {
    assert.throws(() => tel.toolCalled(TRAJECTORY, { call_id: "c", tool: "t", valid: true },
                                       when as Date),
                  (error: Error) => error.name === "TelemetryError" &&
                    error.message.startsWith("occurredAt: must be a Date or an ISO-8601"),
                  String(when));
  }
  assert.deepEqual([tel.stats().queued, tel.stats().droppedInvalid, errors.length], [0, 0, 0]);
  assert.ok(await tel.close(100));
});

test("close() is false when events were lost, and counts start at zero for each client",
     async () => {
  const dir = mkdtempSync(join(tmpdir(), "rs-per-client-"));
  const ingest = await startFakeIngest();
  const first = client(ingest.url, { storage: new FileStorage(dir) });
  for (let i = 0; i < 140; i++) {
    first.tel.toolCalled(TRAJECTORY, { call_id: "", tool: "read_file", valid: true });
  }
  assert.equal(first.tel.stats().droppedInvalid, 140);
  assert.equal(await first.tel.close(5000), false); // every event was dropped: not a success
  const second = client(ingest.url, { storage: new FileStorage(dir) });
  assert.equal(second.tel.stats().droppedInvalid, 0);
  toolCalls(second.tel, 3);
  assert.equal(await second.tel.close(5000), true);
  assert.deepEqual([second.tel.stats().sent, second.tel.stats().droppedInvalid], [3, 0]);
  assert.equal(new FileStorage(dir).loadCounters()["dropped_invalid"], 140);
  await ingest.close();
  rmSync(dir, { recursive: true });
});

test("close() is false when ingest refused a batch for good or rejected an event", async () => {
  const refusing = await startFakeIngest(() => ({ status: 401, body: { detail: "bad key" } }));
  const { tel } = client(refusing.url);
  toolCalls(tel, 2);
  assert.equal(await tel.close(5000), false);
  assert.deepEqual([tel.stats().queued, tel.stats().droppedUndeliverable], [0, 2]);
  await refusing.close();
  const rejecting = await startFakeIngest((events) => ({ status: 207, body: {
    accepted: [], duplicates: [], rejected: events.map((e) => ({ event_id: e["event_id"],
                                                                 reason: "no" })) } }));
  const second = client(rejecting.url);
  toolCalls(second.tel, 1);
  assert.equal(await second.tel.close(5000), false);
  assert.equal(second.tel.stats().rejected, 1);
  await rejecting.close();
});

function sleepMs(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

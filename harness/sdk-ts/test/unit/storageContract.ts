/**
 * The contract every QueueStorage keeps, run through the EventQueue against each backend:
 * order, recovery after a restart, torn lines dropped and counted, bounds with persistent drop
 * counters. A backend test calls {@link queueStorageContract} with its own way to open the same
 * storage again and to cut a write short.
 */

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import type { QueueStorage } from "../../src/index.js";
import { EventQueue } from "../../src/queue.js";

export interface StorageBackend {
  /** A new, empty place to store; each call of ``open`` on it reopens the same contents. */
  fresh(): { open(): QueueStorage; tearLast(text: string): void };
}

const ROOMY = { maxEvents: 1000, maxBytes: 1 << 20 };

function lines(queue: EventQueue): string[] {
  return queue.sealed().flatMap((segment) => queue.read(segment));
}

function opened(storage: QueueStorage, limits = ROOMY): EventQueue {
  const queue = new EventQueue(storage, limits);
  queue.open();
  return queue;
}

export function queueStorageContract(name: string, backend: StorageBackend): void {
  describe(`${name} keeps the queue storage contract`, () => {
    test("events come back in the order they were put, across segments", () => {
      const queue = opened(backend.fresh().open());
      assert.ok(queue.put('{"a":1}') && queue.put('{"a":2}'));
      queue.seal();
      assert.ok(queue.put('{"a":3}'));
      assert.equal(queue.pendingEvents, 3);
      assert.equal(queue.unsealedEvents, 1);
      queue.seal();
      assert.deepEqual(lines(queue), ['{"a":1}', '{"a":2}', '{"a":3}']);
      queue.close();
    });

    test("a restart finds every event an earlier queue held, sealed or not, and adds after it",
         () => {
      const place = backend.fresh();
      const first = opened(place.open());
      first.put('{"a":1}');
      first.seal();
      first.put('{"a":2}'); // still in the open segment
      first.close();
      const second = opened(place.open());
      assert.equal(second.pendingEvents, 2);
      assert.equal(second.unsealedEvents, 0);
      second.put('{"a":3}');
      second.seal();
      assert.deepEqual(lines(second), ['{"a":1}', '{"a":2}', '{"a":3}']);
    });

    test("a removed segment is gone for good", () => {
      const place = backend.fresh();
      const queue = opened(place.open());
      queue.put('{"a":1}');
      queue.seal();
      queue.put('{"a":2}');
      queue.seal();
      queue.remove(queue.sealed()[0]!);
      assert.equal(queue.pendingEvents, 1);
      queue.close();
      assert.deepEqual(lines(opened(place.open())), ['{"a":2}']);
    });

    test("a line cut short by a crash is dropped and counted, once, and whole lines kept", () => {
      const place = backend.fresh();
      const queue = opened(place.open());
      queue.put('{"a":1}');
      queue.put('{"a":2}');
      queue.close();
      place.tearLast('{"a":3'); // half a line at the end of the newest segment
      const recovered = opened(place.open());
      assert.deepEqual(lines(recovered), ['{"a":1}', '{"a":2}']);
      assert.equal(recovered.counters["dropped_torn"], 1);
      recovered.close();
      const again = opened(place.open());
      assert.equal(again.counters["dropped_torn"], 1); // persisted, and not counted twice
      assert.equal(again.pendingEvents, 2);
    });

    test("a full queue refuses events and the drop counter survives a restart", () => {
      const place = backend.fresh();
      const queue = opened(place.open(), { maxEvents: 2, maxBytes: 1 << 20 });
      assert.deepEqual([1, 2, 3, 4].map(() => queue.put("{}")), [true, true, false, false]);
      queue.close();
      const reopened = opened(place.open(), { maxEvents: 2, maxBytes: 1 << 20 });
      assert.equal(reopened.counters["dropped_queue_full"], 2);
      assert.equal(reopened.put("{}"), false); // still full: the two events are still queued
    });

    test("the byte bound counts UTF-8 bytes and the newline", () => {
      const queue = opened(backend.fresh().open(), { maxEvents: 100, maxBytes: 12 });
      assert.ok(queue.put('"é"')); // 4 bytes and the newline: 5
      assert.ok(queue.put('"éé"')); // 7 more: 12
      assert.ok(!queue.put("1")); // 2 more would be 14 (in UTF-16 units it would fit)
      assert.equal(queue.counters["dropped_queue_full"], 1);
    });
  });
}

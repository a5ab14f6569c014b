import assert from "node:assert/strict";
import test from "node:test";

import { isUuid7, uuid7, uuid7TimeMs } from "../../src/ids.js";

test("uuid7 carries the version, the RFC 9562 variant and the milliseconds it was made at", () => {
  const ms = Date.UTC(2025, 0, 31, 12, 0, 0, 123);
  const id = uuid7(ms);
  assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.equal(uuid7TimeMs(id), ms);
  assert.ok(isUuid7(id));
  assert.ok(!isUuid7("0190a1b2-c3d4-4e5f-8a6b-7c8d9e0f1a2b")); // a version-4 id
});

test("uuid7 ids are unique and sort by the time they were made", () => {
  const ids = Array.from({ length: 2000 }, (_, i) => uuid7(1_700_000_000_000 + i));
  assert.equal(new Set(ids).size, ids.length);
  assert.deepEqual([...ids].sort(), ids);
});

test("uuid7 refuses a time outside the 48-bit field", () => {
  assert.throws(() => uuid7(-1), /48-bit/);
  assert.throws(() => uuid7(2 ** 48), /48-bit/);
  assert.throws(() => uuid7(Number.NaN), /48-bit/);
});

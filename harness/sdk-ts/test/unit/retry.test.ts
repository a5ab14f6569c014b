import assert from "node:assert/strict";
import test from "node:test";

import { backoffDelayMs, classify, parseRetryAfterMs } from "../../src/retry.js";

test("each ingest answer maps to done, retry, split or drop", () => {
  const actions = Object.fromEntries([200, 207, 403, 413, 400, 401, 404, 415, 422, 408, 429, 500,
                                      502, 503].map((status) => [status, classify(status)]));
  assert.deepEqual(actions, {
    200: "done", 207: "done", 403: "done", 413: "split", 400: "drop", 401: "drop", 404: "drop",
    415: "drop", 422: "drop", 408: "retry", 429: "retry", 500: "retry", 502: "retry",
    503: "retry",
  });
});

test("Retry-After is read as delta-seconds or an HTTP date", () => {
  const now = Date.parse("Wed, 21 Oct 2015 07:28:00 GMT");
  assert.equal(parseRetryAfterMs("3", now), 3000);
  assert.equal(parseRetryAfterMs(" 0 ", now), 0);
  assert.equal(parseRetryAfterMs("Wed, 21 Oct 2015 07:28:05 GMT", now), 5000);
  assert.equal(parseRetryAfterMs("Wed, 21 Oct 2015 07:27:00 GMT", now), 0); // past: no wait
  assert.equal(parseRetryAfterMs("soon", now), null);
  assert.equal(parseRetryAfterMs(null, now), null);
});

test("backoff doubles up to the cap with equal jitter and never undercuts Retry-After", () => {
  assert.equal(backoffDelayMs(0, 100, 1000, null, 0), 50);
  assert.equal(backoffDelayMs(0, 100, 1000, null, 0.999999), 99.99995);
  assert.equal(backoffDelayMs(3, 100, 1000, null, 0), 400);
  assert.equal(backoffDelayMs(20, 100, 1000, null, 0), 500); // capped at 1000, half fixed
  assert.equal(backoffDelayMs(0, 100, 1000, 2000, 0), 2000);
  assert.equal(backoffDelayMs(0, 100, 1000, 2000, 0.5), 2050); // jitter on top of the floor
  for (let attempt = 0; attempt < 40; attempt++) {
    const delay = backoffDelayMs(attempt, 250, 30_000, null, Math.random());
    assert.ok(delay >= Math.min(30_000, 250 * 2 ** attempt) / 2 && delay <= 30_000);
  }
});

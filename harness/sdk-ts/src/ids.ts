/** RFC 9562 UUIDv7 event ids: time-ordered, made by the client, the ingest's idempotency key. */

const MAX_UNIX_MS = 2 ** 48;

/** A fresh version-7 UUID: 48 bits of Unix milliseconds, the version, 74 random bits. */
export function uuid7(unixMs: number = Date.now()): string {
  if (!Number.isInteger(unixMs) || unixMs < 0 || unixMs >= MAX_UNIX_MS) {
    throw new RangeError(`unix_ms ${unixMs} does not fit the 48-bit UUIDv7 timestamp`);
  }
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes.subarray(6));
  let ms = unixMs;
  for (let i = 5; i >= 0; i--) {
    bytes[i] = ms % 256;
    ms = Math.floor(ms / 256);
  }
  bytes[6] = 0x70 | (bytes[6]! & 0x0f); // version 7
  bytes[8] = 0x80 | (bytes[8]! & 0x3f); // variant 10 (RFC 9562)
  const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${
    hex.slice(20)}`;
}

/** The Unix milliseconds a UUIDv7 was made at. */
export function uuid7TimeMs(id: string): number {
  return parseInt(id.replace(/-/g, "").slice(0, 12), 16);
}

export function isUuid7(id: string): boolean {
  return /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i.test(id);
}


/**
 * A stand-in for the ingest API on loopback, for the client's reactions to answers the real
 * service gives only under conditions a unit test cannot arrange (413 at a chosen size, 429 with
 * a Retry-After, a 4xx). It records each request and decodes its gzip'd NDJSON body.
 */

import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { gunzipSync } from "node:zlib";

export interface ReceivedBatch {
  readonly headers: IncomingHttpHeaders;
  readonly events: Record<string, any>[];
  readonly atMs: number;
}

export interface Answer {
  status: number;
  headers?: Record<string, string>;
  body?: unknown;
}

/** Default answer: every event accepted, as ingest's 200 says it. */
export function acceptAll(events: Record<string, any>[]): Answer {
  return { status: 200, body: { accepted: events.map((e) => e["event_id"]), duplicates: [],
                                rejected: [] } };
}

export interface FakeIngest {
  readonly url: string;
  readonly batches: ReceivedBatch[];
  close(): Promise<void>;
}

export async function startFakeIngest(
  answer: (events: Record<string, any>[], request: number) => Answer = acceptAll,
): Promise<FakeIngest> {
  const batches: ReceivedBatch[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const text = gunzipSync(Buffer.concat(chunks)).toString("utf8");
      const events = text.split("\n").map((line) => JSON.parse(line) as Record<string, any>);
      batches.push({ headers: request.headers, events, atMs: Date.now() });
      const reply = answer(events, batches.length - 1);
      response.writeHead(reply.status, { "content-type": "application/json", ...reply.headers });
      response.end(JSON.stringify(reply.body ?? { detail: "no" }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    batches,
    close: () => new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

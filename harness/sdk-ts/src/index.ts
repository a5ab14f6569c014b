/**
 * The rewardstream telemetry SDK for browsers, webviews and Node: typed events, a durable queue
 * over a pluggable storage, gzip'd NDJSON batches to the ingest API. Node's file-backed storage is
 * in `@rewardstream/telemetry/node`.
 */

export { Telemetry, type TelemetryOptions, type TelemetryStats } from "./client.js";
export { TelemetryError, type TelemetryErrorKind } from "./errors.js";
export * from "./generated/events.js";
export { isUuid7, uuid7, uuid7TimeMs } from "./ids.js";
export { type MemoryState, MemoryStorage } from "./memoryStorage.js";
export { type QueueStorage } from "./storage.js";
export {
  type SpanContextLike,
  type TraceTrajectoryFields,
  type Trajectory,
  trajectoryFromSpanContext,
  trajectoryFromTraceparent,
} from "./trajectory.js";

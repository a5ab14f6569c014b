/**
 * Writes src/generated/events.ts from the committed JSON Schemas: for the newest version of each
 * event type, its TypeScript types, its schema (what the client validates against) and a typed
 * constructor. Usage: `npm run generate [-- SCHEMA_DIR]` (default: the repository's
 * schemas/jsonschema). test/unit/generated.test.ts renders again and compares.
 */

import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

import { type JsonSchema, SUPPORTED_FORMATS, SUPPORTED_KEYWORDS } from "../src/schema.js";

export const PACKAGE_ROOT = fileURLToPath(new URL("../..", import.meta.url));
export const DEFAULT_SCHEMA_DIR = join(PACKAGE_ROOT, "..", "..", "schemas", "jsonschema");
export const GENERATED_FILE = join(PACKAGE_ROOT, "src", "generated", "events.ts");

const SCHEMA_FILE = /^(?<type>[a-z_]+\.[a-z_]+)\.v(?<version>\d+)\.json$/;
const TYPES = new Set(["string", "integer", "number", "boolean", "null", "array", "object"]);

export interface PublishedSchema {
  type: string;
  version: number;
  file: string;
  schema: JsonSchema;
}

/** The newest published version of each event type in ``schemaDir``, by type name. */
export function newestSchemas(schemaDir: string): PublishedSchema[] {
  const newest = new Map<string, { version: number; file: string }>();
  for (const file of readdirSync(schemaDir)) {
    const match = SCHEMA_FILE.exec(file);
    if (match?.groups === undefined) continue;
    const { type, version } = match.groups as { type: string; version: string };
    if ((newest.get(type)?.version ?? -1) < Number(version)) {
      newest.set(type, { version: Number(version), file });
    }
  }
  if (newest.size === 0) throw new Error(`no <type>.v<N>.json schemas in ${schemaDir}`);
  return [...newest.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([type, found]) => {
    const schema = JSON.parse(readFileSync(join(schemaDir, found.file), "utf8")) as JsonSchema;
    checkKeywords(schema, found.file, "");
    const declared = schema.properties?.["type"]?.const;
    if (declared !== type) throw new Error(`${found.file}: type const is ${String(declared)}`);
    const version = schema.properties?.["schema_version"]?.const;
    if (version !== undefined && version !== found.version) {
      throw new Error(`${found.file}: schema_version const is ${String(version)}`);
    }
    return { type, version: found.version, file: found.file, schema };
  });
}

/** Refuses what the client's validator would not enforce, naming the file and the place. */
function checkKeywords(schema: JsonSchema, file: string, path: string): void {
  const where = path || "(root)";
  for (const key of Object.keys(schema)) {
    if (!SUPPORTED_KEYWORDS.has(key)) {
      throw new Error(`${file}: unsupported JSON Schema keyword "${key}" at ${where}`);
    }
  }
  if (schema.type !== undefined && !TYPES.has(schema.type)) {
    throw new Error(`${file}: unsupported type "${schema.type}" at ${where}`);
  }
  if (schema.format !== undefined && !SUPPORTED_FORMATS.has(schema.format)) {
    throw new Error(`${file}: unsupported format "${schema.format}" at ${where}`);
  }
  const children: [string, JsonSchema][] = [
    ...Object.entries(schema.$defs ?? {}).map(([k, v]): [string, JsonSchema] => [`$defs.${k}`, v]),
    ...Object.entries(schema.properties ?? {}).map(([k, v]): [string, JsonSchema] => [k, v]),
    ...(schema.anyOf ?? []).map((v, i): [string, JsonSchema] => [`anyOf.${i}`, v]),
    ...(schema.items ? [["items", schema.items] as [string, JsonSchema]] : []),
  ];
  for (const [name, child] of children) checkKeywords(child, file, path ? `${path}.${name}` : name);
}

function pascal(type: string): string {
  return type.split(/[._]/).map((part) => part[0]!.toUpperCase() + part.slice(1)).join("");
}

function camel(type: string): string {
  const name = pascal(type);
  return name[0]!.toLowerCase() + name.slice(1);
}

function literal(value: unknown): string {
  return JSON.stringify(value);
}

function tsType(schema: JsonSchema): string {
  if (schema.$ref !== undefined) return schema.$ref.replace(/^#\/\$defs\//, "");
  if (schema.anyOf !== undefined) return schema.anyOf.map(tsType).join(" | ");
  if (schema.const !== undefined) return literal(schema.const);
  if (schema.enum !== undefined) return schema.enum.map(literal).join(" | ");
  switch (schema.type) {
    case "integer":
    case "number": return "number";
    case "array": {
      const item = schema.items === undefined ? "unknown" : tsType(schema.items);
      return item.includes(" ") ? `(${item})[]` : `${item}[]`;
    }
    case "object":
      return schema.properties === undefined ? "Record<string, unknown>"
        : `{ ${members(schema, "").join(" ")} }`;
    case undefined: return "unknown";
    default: return schema.type;
  }
}

function members(schema: JsonSchema, indent: string, forceRequired: string[] = []): string[] {
  const required = new Set([...(schema.required ?? []), ...forceRequired]);
  return Object.entries(schema.properties ?? {}).map(([name, property]) => {
    const optional = required.has(name) ? "" : "?";
    const type = tsType(property);
    const line = `${indent}${name}${optional}: ${type};`;
    if (line.length <= 100 || (property.anyOf === undefined && property.enum === undefined)) {
      return line;
    }
    const branches = type.split(" | ").map((branch) => `${indent}  | ${branch}`);
    return [`${indent}${name}${optional}:`, ...branches].join("\n") + ";";
  });
}

function renderInterface(name: string, schema: JsonSchema, doc: string, force?: string[]): string {
  return [`/** ${doc} */`, `export interface ${name} {`, ...members(schema, "  ", force), "}", ""]
    .join("\n");
}

function stripTitles(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(stripTitles);
  if (typeof schema !== "object" || schema === null) return schema;
  return Object.fromEntries(Object.entries(schema).filter(([key]) => key !== "title")
    .map(([key, value]) => [key, key === "default" || key === "const" || key === "enum"
      ? value : stripTitles(value)]));
}

/** The whole generated module for the schemas in ``schemaDir``. */
export function renderEvents(schemaDir: string = DEFAULT_SCHEMA_DIR): string {
  const published = newestSchemas(schemaDir);
  const out: string[] = [
    "// Generated by scripts/generate-events.ts from schemas/jsonschema (the newest version of",
    "// each event type): do not edit. `npm run generate` rewrites it; test/unit/generated.test.ts",
    "// fails when this file and the schemas drift.",
    "",
    'import type { JsonSchema } from "../schema.js";',
    'import type { Trajectory } from "../trajectory.js";',
    "",
  ];
  const defs = new Map<string, string>();
  for (const { type, version, file, schema } of published) {
    for (const [name, def] of Object.entries(schema.$defs ?? {})) {
      const rendered = renderInterface(name, def, `Part of ${type} v${version} (${file}).`);
      const earlier = defs.get(name);
      if (earlier !== undefined && earlier.split("\n").slice(1).join() !==
          rendered.split("\n").slice(1).join()) {
        throw new Error(`${file}: $defs.${name} differs from an earlier schema's ${name}`);
      }
      if (earlier === undefined) defs.set(name, rendered);
    }
  }
  out.push(...defs.values());
  for (const { type, version, file, schema } of published) {
    out.push(renderInterface(`${pascal(type)}Event`, schema,
                             `One ${type} event, schema version ${version} (${file}).`, ["type"]));
  }
  const types = published.map((p) => p.type);
  const payloadOf = (p: PublishedSchema): string => tsType(p.schema.properties?.["payload"] ?? {});
  out.push(
    `export type Event =\n  | ${published.map((p) => `${pascal(p.type)}Event`).join("\n  | ")};`,
    "",
    'export type EventType = Event["type"];',
    "",
    `export const EVENT_TYPES: readonly EventType[] = [\n${
      types.map((t) => `  ${literal(t)},`).join("\n")}\n];`,
    "",
    "/** The payload each event type carries. */",
    `export interface PayloadOf {\n${
      published.map((p) => `  ${literal(p.type)}: ${payloadOf(p)};`).join("\n")}\n}`,
    "",
    "/** The schema version the client writes for each type (the newest published). */",
    `export const SCHEMA_VERSIONS: Readonly<Record<EventType, number>> = {\n${
      published.map((p) => `  ${literal(p.type)}: ${p.version},`).join("\n")}\n};`,
    "",
    "/** The published JSON Schema of each type, less titles: what the client validates with. */",
    `export const EVENT_SCHEMAS: Readonly<Record<EventType, JsonSchema>> = ${
      JSON.stringify(Object.fromEntries(published.map((p) => [p.type, stripTitles(p.schema)])),
                     null, 2)};`,
    "",
    "/** One typed constructor per event type: the new event's id, or null when not queued. */",
    "export abstract class EventConstructors {",
    "  protected abstract record<T extends EventType>(",
    "    type: T, trajectory: Trajectory, payload: PayloadOf[T], occurredAt?: Date | string,",
    "  ): string | null;",
  );
  for (const { type } of published) {
    out.push(
      "",
      `  /**`,
      `   * Queue a ${type} event that occurred at \`occurredAt\` (a Date or an ISO-8601 string`,
      "   * with a zone; default: now). Throws a TelemetryError naming occurredAt for anything",
      "   * else; an invalid payload is refused (null), counted and reported to onError.",
      "   */",
      `  ${camel(type)}(`,
      `    trajectory: Trajectory, payload: PayloadOf[${literal(type)}],`,
      "    occurredAt?: Date | string,",
      "  ): string | null {",
      `    return this.record(${literal(type)}, trajectory, payload, occurredAt);`,
      "  }",
    );
  }
  out.push("}", "");
  return out.join("\n");
}

/** Method name of each type's constructor (``tool.called`` → ``toolCalled``). */
export function constructorName(type: string): string {
  return camel(type);
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  writeFileSync(GENERATED_FILE, renderEvents(process.argv[2] ?? DEFAULT_SCHEMA_DIR));
  console.log(`wrote ${GENERATED_FILE}`);
}

/**
 * The subset of JSON Schema that the committed event schemas use, a validator for it and the
 * filling of defaults. The generator refuses a schema with any other keyword, so a schema change
 * the validator cannot enforce fails the build instead of passing events unchecked.
 */

export interface JsonSchema {
  readonly $defs?: Readonly<Record<string, JsonSchema>>;
  readonly $ref?: string;
  readonly additionalProperties?: boolean;
  readonly anyOf?: readonly JsonSchema[];
  readonly const?: unknown;
  readonly default?: unknown;
  readonly description?: string;
  readonly enum?: readonly unknown[];
  readonly exclusiveMaximum?: number;
  readonly exclusiveMinimum?: number;
  readonly format?: string;
  readonly items?: JsonSchema;
  readonly maxItems?: number;
  readonly maxLength?: number;
  readonly maximum?: number;
  readonly minItems?: number;
  readonly minLength?: number;
  readonly minimum?: number;
  readonly pattern?: string;
  readonly properties?: Readonly<Record<string, JsonSchema>>;
  readonly required?: readonly string[];
  readonly title?: string;
  readonly type?: string;
}

/** Every keyword {@link validate} enforces or may ignore (title, description). */
export const SUPPORTED_KEYWORDS: ReadonlySet<string> = new Set([
  "$defs", "$ref", "additionalProperties", "anyOf", "const", "default", "description", "enum",
  "exclusiveMaximum", "exclusiveMinimum", "format", "items", "maxItems", "maxLength", "maximum",
  "minItems", "minLength", "minimum", "pattern", "properties", "required", "title", "type",
]);
export const SUPPORTED_FORMATS: ReadonlySet<string> = new Set(["uuid", "date-time"]);

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
// RFC 3339 with a zone: pydantic's AwareDatetime refuses times without one.
const DATE_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/i;

/** An RFC 3339 date-time with a zone as a Date; null when ``text`` is not one. */
export function parseDateTime(text: string): Date | null {
  if (!DATE_TIME.test(text)) return null;
  const [year, month, day] = text.slice(0, 10).split("-").map(Number) as [number, number, number];
  // Date would roll 2025-02-30 over into March; the ingest refuses it.
  if (day < 1 || day > new Date(Date.UTC(year, month, 0)).getUTCDate()) return null;
  const when = new Date(text);
  return isNaN(when.getTime()) ? null : when;
}

function resolve(schema: JsonSchema, root: JsonSchema): JsonSchema {
  if (schema.$ref === undefined) return schema;
  const name = schema.$ref.replace(/^#\/\$defs\//, "");
  const target = root.$defs?.[name];
  if (target === undefined) throw new Error(`schema reference ${schema.$ref} is not defined`);
  return target;
}

function describe(value: unknown): string {
  return typeof value === "number" ? String(value) : JSON.stringify(value) ?? String(value);
}

function characters(n: number): string {
  return n === 1 ? "1 character" : `${n} characters`;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function typeProblem(type: string, value: unknown): string | null {
  switch (type) {
    case "string": return typeof value === "string" ? null : "must be a string";
    case "boolean": return typeof value === "boolean" ? null : "must be a boolean";
    case "null": return value === null ? null : "must be null";
    case "integer": return Number.isInteger(value) ? null : "must be an integer";
    case "number":
      return typeof value === "number" && Number.isFinite(value) ? null
        : "must be a finite number";
    case "array": return Array.isArray(value) ? null : "must be an array";
    case "object": return isPlainObject(value) ? null : "must be an object";
    default: return `has an unsupported schema type ${type}`;
  }
}

function boundProblem(schema: JsonSchema, value: unknown): string | null {
  if (typeof value === "number") {
    if (schema.minimum !== undefined && value < schema.minimum) {
      return `must be >= ${schema.minimum}`;
    }
    if (schema.maximum !== undefined && value > schema.maximum) {
      return `must be <= ${schema.maximum}`;
    }
    if (schema.exclusiveMinimum !== undefined && value <= schema.exclusiveMinimum) {
      return `must be > ${schema.exclusiveMinimum}`;
    }
    if (schema.exclusiveMaximum !== undefined && value >= schema.exclusiveMaximum) {
      return `must be < ${schema.exclusiveMaximum}`;
    }
  }
  if (typeof value === "string") {
    const length = [...value].length; // code points, as pydantic counts
    if (schema.minLength !== undefined && length < schema.minLength) {
      return `must have at least ${characters(schema.minLength)}`;
    }
    if (schema.maxLength !== undefined && length > schema.maxLength) {
      return `must have at most ${characters(schema.maxLength)}`;
    }
    if (schema.pattern !== undefined && !new RegExp(schema.pattern, "u").test(value)) {
      return `must match ${schema.pattern}`;
    }
    if (schema.format === "uuid" && !UUID.test(value)) return "must be a UUID";
    if (schema.format === "date-time" && parseDateTime(value) === null) {
      return "must be an ISO-8601 date-time with a time zone";
    }
  }
  if (Array.isArray(value)) {
    if (schema.minItems !== undefined && value.length < schema.minItems) {
      return `must have at least ${schema.minItems} items`;
    }
    if (schema.maxItems !== undefined && value.length > schema.maxItems) {
      return `must have at most ${schema.maxItems} items`;
    }
  }
  return null;
}

function join(path: string, key: string | number): string {
  return path === "" ? String(key) : `${path}.${key}`;
}

/**
 * The first problem of ``value`` against ``schema``, as "field.path: reason" (the path style of
 * the ingest API's answers, e.g. ``payload.behaviour_logprobs.3``), or null when it is valid.
 */
export function validate(
  schema: JsonSchema, value: unknown, root: JsonSchema = schema, path = "",
): string | null {
  const here = resolve(schema, root);
  const at = (reason: string): string => `${path || "(event)"}: ${reason}`;
  if (here.anyOf !== undefined) {
    const problems = here.anyOf.map((branch) => validate(branch, value, root, path));
    if (problems.includes(null)) return null;
    // A null fails every branch but the null one: report the branch that fits the value's kind.
    const nonNull = here.anyOf.findIndex((branch) => branch.type !== "null");
    return value === null ? at("must not be null") : problems[Math.max(nonNull, 0)] ?? null;
  }
  if (here.const !== undefined && value !== here.const) {
    return at(`must be ${describe(here.const)}`);
  }
  if (here.enum !== undefined && !here.enum.includes(value)) {
    return at(`must be one of ${here.enum.map(describe).join(", ")}, got ${describe(value)}`);
  }
  const wrongType = here.type === undefined ? null : typeProblem(here.type, value);
  if (wrongType !== null) return at(`${wrongType}, got ${describe(value)}`);
  const outOfBounds = boundProblem(here, value);
  if (outOfBounds !== null) return at(outOfBounds);
  if (Array.isArray(value) && here.items !== undefined) {
    for (const [index, item] of value.entries()) {
      const problem = validate(here.items, item, root, join(path, index));
      if (problem !== null) return problem;
    }
  }
  if (isPlainObject(value) && here.properties !== undefined) {
    for (const name of here.required ?? []) {
      if (value[name] === undefined) return `${join(path, name)}: is required`;
    }
    for (const [name, item] of Object.entries(value)) {
      if (item === undefined) continue; // JSON.stringify leaves it out
      const property = here.properties[name];
      if (property === undefined) {
        if (here.additionalProperties === false) return `${join(path, name)}: unknown field`;
        continue;
      }
      const problem = validate(property, item, root, join(path, name));
      if (problem !== null) return problem;
    }
  }
  return null;
}

/** A copy of ``value`` with every absent property that has a default set to it, recursively. */
export function withDefaults<T>(schema: JsonSchema, value: T, root: JsonSchema = schema): T {
  const here = resolve(schema, root);
  if (!isPlainObject(value)) return value;
  const objectSchema = here.anyOf?.map((b) => resolve(b, root)).find((b) => b.properties) ?? here;
  if (objectSchema.properties === undefined) return value;
  const filled: Record<string, unknown> = { ...value };
  for (const [name, property] of Object.entries(objectSchema.properties)) {
    if (filled[name] === undefined && "default" in property) {
      filled[name] = structuredClone(property.default);
    }
    if (filled[name] !== undefined) filled[name] = withDefaults(property, filled[name], root);
  }
  return filled as T;
}

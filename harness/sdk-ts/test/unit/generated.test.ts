import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "node:test";

import {
  DEFAULT_SCHEMA_DIR, GENERATED_FILE, newestSchemas, renderEvents,
} from "../../scripts/generate-events.js";

function copyOfSchemas(): string {
  const dir = mkdtempSync(join(tmpdir(), "rs-schemas-"));
  cpSync(DEFAULT_SCHEMA_DIR, dir, { recursive: true });
  return dir;
}

/** The file of the newest published version of ``type``, whichever version that is. */
function newestFile(type: string): string {
  const found = newestSchemas(DEFAULT_SCHEMA_DIR).find((p) => p.type === type);
  if (found === undefined) throw new Error(`no schema for ${type}`);
  return found.file;
}

function editSchema(dir: string, file: string, edit: (schema: any) => void): void {
  const schema = JSON.parse(readFileSync(join(dir, file), "utf8"));
  edit(schema);
  writeFileSync(join(dir, file), JSON.stringify(schema, null, 2));
}

test("the committed src/generated/events.ts is what the committed schemas generate", () => {
  assert.equal(readFileSync(GENERATED_FILE, "utf8"), renderEvents(DEFAULT_SCHEMA_DIR),
               "src/generated/events.ts and schemas/jsonschema drift: run `npm run generate`");
});

test("a changed bound in a schema changes the generated module", (t) => {
  const dir = copyOfSchemas();
  t.after(() => rmSync(dir, { recursive: true }));
  editSchema(dir, newestFile("trajectory.ended"), (schema) => {
    schema.$defs.TrajectoryEndedPayload.properties.turns.maximum = 1000;
  });
  const rendered = renderEvents(dir);
  assert.notEqual(rendered, renderEvents(DEFAULT_SCHEMA_DIR));
  assert.match(rendered, /"maximum": 1000/);
});

test("the newest version of each type is the one generated", (t) => {
  const dir = copyOfSchemas();
  t.after(() => rmSync(dir, { recursive: true }));
  cpSync(join(dir, newestFile("followup.sent")), join(dir, "followup.sent.v50.json"));
  editSchema(dir, "followup.sent.v50.json", (schema) => {
    schema.properties.schema_version = { const: 50, default: 50, type: "integer" };
    schema.$defs.FollowupSentPayload.properties.sentiment.enum.push("delighted");
  });
  cpSync(join(dir, "followup.sent.v50.json"), join(dir, "followup.sent.v100.json"));
  editSchema(dir, "followup.sent.v100.json", (schema) => {
    schema.properties.schema_version = { const: 100, default: 100, type: "integer" };
  });
  const newest = newestSchemas(dir).find((p) => p.type === "followup.sent");
  assert.equal(newest?.version, 100); // by number, not by name: v100 is newer than v50
  const rendered = renderEvents(dir);
  assert.match(rendered, /"followup\.sent": 100,/);
  assert.match(rendered, /sentiment: "dissatisfied" \| "neutral" \| "satisfied" \| "delighted";/);
});

test("a keyword the client cannot enforce fails generation, naming file and place", (t) => {
  const dir = copyOfSchemas();
  t.after(() => rmSync(dir, { recursive: true }));
  const file = newestFile("edit.proposed");
  editSchema(dir, file, (schema) => {
    schema.$defs.EditProposedPayload.properties.path.multipleOf = 2;
  });
  assert.throws(() => renderEvents(dir), {
    message: `${file}: unsupported JSON Schema keyword "multipleOf" at ` +
      "$defs.EditProposedPayload.path",
  });
});

test("a schema whose version does not match its file name fails generation", (t) => {
  const dir = copyOfSchemas();
  t.after(() => rmSync(dir, { recursive: true }));
  cpSync(join(dir, "edit.decided.v1.json"), join(dir, "edit.decided.v99.json"));
  assert.throws(() => renderEvents(dir), /edit\.decided\.v99\.json: schema_version const is 1/);
});

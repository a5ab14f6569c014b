import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import test from "node:test";

import { PACKAGE_ROOT } from "../../scripts/generate-events.js";

test("the package has no runtime dependencies, only typescript and @types/node to build", () => {
  const manifest = JSON.parse(readFileSync(join(PACKAGE_ROOT, "package.json"), "utf8"));
  assert.equal(manifest.dependencies, undefined);
  assert.deepEqual(Object.keys(manifest.devDependencies).sort(), ["@types/node", "typescript"]);
});

test("the browser entry point imports nothing of Node: only the /node entry does", () => {
  const core = join(PACKAGE_ROOT, "dist", "src");
  const modules = readdirSync(core, { recursive: true, encoding: "utf8" })
    .filter((path) => path.endsWith(".js") && !path.startsWith("node"));
  assert.ok(modules.includes("client.js") && modules.includes("generated/events.js"));
  for (const path of modules) {
    const imports = [...readFileSync(join(core, path), "utf8")
      .matchAll(/(?:from|import)\s*\(?\s*["']([^"']+)["']/g)].map((m) => m[1]!);
    assert.deepEqual(imports.filter((spec) => !spec.startsWith("./") && !spec.startsWith("../")),
                     [], `${path} imports a module outside the package`);
  }
});

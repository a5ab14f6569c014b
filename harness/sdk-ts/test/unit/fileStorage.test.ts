import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { appendFileSync, mkdirSync, mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test, { after } from "node:test";

import { FileStorage } from "../../src/node/index.js";
import { queueStorageContract } from "./storageContract.js";

const root = mkdtempSync(join(tmpdir(), "rs-file-storage-"));
after(() => spawnSync("rm", ["-rf", root]));
let made = 0;

queueStorageContract("FileStorage", {
  fresh() {
    const dir = join(root, String(made++));
    return {
      open: () => new FileStorage(dir),
      tearLast(text) {
        const last = readdirSync(dir).filter((n) => n.startsWith("seg-")).sort().at(-1)!;
        appendFileSync(join(dir, last), text);
      },
    };
  },
});

test("a directory held by a live process is refused, and free again once closed", () => {
  const dir = join(root, "locked");
  const holder = new FileStorage(dir);
  holder.open();
  assert.throws(() => new FileStorage(dir).open(), /in use by live process \d+/);
  holder.close();
  const next = new FileStorage(dir);
  next.open();
  next.close();
});

test("the lock of a process that is gone is taken over", () => {
  const dir = join(root, "stale");
  const gone = spawnSync(process.execPath, ["-e", "console.log(process.pid)"],
                        { encoding: "utf8" });
  mkdirSync(dir);
  writeFileSync(join(dir, ".lock"), gone.stdout.trim());
  const storage = new FileStorage(dir);
  storage.open();
  storage.close();
});

test("segments are files named in order, one event per line", () => {
  const dir = join(root, "layout");
  const storage = new FileStorage(dir);
  storage.open();
  storage.append(2, '{"a":1}');
  storage.append(10, '{"a":2}');
  assert.deepEqual(storage.list(), [2, 10]);
  assert.deepEqual(readdirSync(dir).filter((n) => n.startsWith("seg-")).sort(),
                   ["seg-000000000002.ndjson", "seg-000000000010.ndjson"]);
  storage.close();
});

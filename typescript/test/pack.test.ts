/**
 * The package as published: `npm pack` makes a tarball that installs in a
 * fresh folder, where the SDK and its subpath exports import and work.
 */

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const PKG = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

test("npm pack installs in a fresh folder and imports", () => {
  const dir = mkdtempSync(join(tmpdir(), "lev-ts-pack-"));
  try {
    // dist/ is built already (the test step builds before it tests).
    execFileSync("npm", ["pack", "--ignore-scripts", "--pack-destination", dir], {
      cwd: PKG,
      stdio: "pipe",
    });
    const tarball = readdirSync(dir).find((f) => f.endsWith(".tgz"));
    assert.ok(tarball, "no tarball");
    const app = join(dir, "app");
    execFileSync("mkdir", ["-p", app]);
    writeFileSync(
      join(app, "package.json"),
      JSON.stringify({ name: "app", private: true, type: "module" }),
    );
    execFileSync(
      "npm",
      ["install", "--no-audit", "--no-fund", "--prefer-offline", "--omit=peer", join(dir, tarball)],
      { cwd: app, stdio: "pipe" },
    );
    const script = `
      import * as lev from "lev-sdk";
      import { LevApprovals } from "lev-sdk/ai";
      const keys = new lev.TrustedKeys(["11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"]);
      const client = new lev.Client("http://127.0.0.1:9", "t");
      console.log(JSON.stringify({
        keys: keys.size,
        client: typeof client.ask,
        gatekeeper: typeof lev.Gatekeeper,
        operator: typeof lev.Operator,
        ai: typeof LevApprovals,
        parsed: String(lev.strictParse('{"n":18446744073709551615}').n),
      }));
    `;
    writeFileSync(join(app, "check.mjs"), script);
    const out = JSON.parse(
      execFileSync(process.execPath, ["check.mjs"], { cwd: app, encoding: "utf8" }),
    );
    assert.deepEqual(out, {
      keys: 1,
      client: "function",
      gatekeeper: "function",
      operator: "function",
      ai: "function",
      parsed: "18446744073709551615",
    });
    // The subpaths of the adapters whose frameworks are not installed are
    // declared, and fail only for want of the framework.
    const pkg = JSON.parse(
      execFileSync(process.execPath, ["-p", "JSON.stringify(require('lev-sdk/package.json'))"], {
        cwd: app,
        encoding: "utf8",
      }),
    );
    assert.deepEqual(Object.keys(pkg.exports).sort(), [
      ".",
      "./ai",
      "./langchain",
      "./openai-agents",
      "./package.json",
    ]);
    const files = execFileSync("tar", ["-tzf", join(dir, tarball)], { encoding: "utf8" });
    assert.match(files, /package\/dist\/src\/index\.d\.ts/);
    assert.doesNotMatch(files, /dist\/test\//);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

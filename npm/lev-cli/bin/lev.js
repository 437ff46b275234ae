#!/usr/bin/env node
// The `lev` command of the npm package lev-cli: finds the prebuilt binary in
// this platform's package (an optional dependency: npm installs only the one
// whose os and cpu match, as esbuild and @biomejs/biome do) and runs it with
// the same arguments, stdio and exit status. LEV_BINARY_PATH overrides it.
"use strict";

const { spawn } = require("child_process");

const PACKAGES = {
  "linux x64": "@lev-cli/linux-x64",
  "linux arm64": "@lev-cli/linux-arm64",
};

function fail(message) {
  process.stderr.write(`lev-cli: ${message}\n`);
  process.exit(1);
}

function binaryPath() {
  if (process.env.LEV_BINARY_PATH) {
    return process.env.LEV_BINARY_PATH;
  }
  const platform = `${process.platform} ${process.arch}`;
  const pkg = PACKAGES[platform];
  if (!pkg) {
    fail(
      `no prebuilt lev for ${platform} (there are: ${Object.keys(PACKAGES).join(", ")})\n` +
        "hint: build it from source with `cargo install lev-cli`",
    );
  }
  try {
    return require.resolve(`${pkg}/bin/lev`);
  } catch (e) {
    fail(
      `expected the package ${pkg} beside lev-cli, found none (${e.code || e.message})\n` +
        "hint: it is an optional dependency: install without --omit=optional / --no-optional",
    );
  }
}

const child = spawn(binaryPath(), process.argv.slice(2), { stdio: "inherit" });

// A signal sent to this process alone (kill PID) reaches lev too; Ctrl-C in a
// terminal reaches both already, and lev decides how to stop.
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => {
    if (child.exitCode === null && child.signalCode === null) {
      try {
        child.kill(signal);
      } catch (_) {
        // Already gone.
      }
    }
  });
}

child.on("error", (e) => fail(`cannot run ${child.spawnfile}: ${e.message}`));
child.on("exit", (code, signal) => {
  if (signal) {
    // Die of the same signal, so a shell sees what lev saw.
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
    return;
  }
  process.exit(code === null ? 1 : code);
});

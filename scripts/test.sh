#!/usr/bin/env bash
# The whole test suite, as CI runs it: formatting, lints, every test, the fuzz
# target's build. Installs and starts what the tests need (Python packages for
# the peer-client tests, PostgreSQL when it is down, the pinned Codex CLI) so a
# fresh machine passes.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step says when it starts (seconds since the start), and the end lists
# how long each took, so a slow step shows where the time goes.
start=$SECONDS
last=$SECONDS
name=""
times=()
step() {
  if [ -n "$name" ]; then
    times+=("$(printf '%5d s  %s' $((SECONDS - last)) "$name")")
  fi
  name="$*"
  last=$SECONDS
  printf '\n==> [%4d s] %s\n' $((SECONDS - start)) "$*"
}

step "test services"
bash scripts/services.sh

step "python test environment"
bash scripts/python-env.sh
export LEV_TEST_PYTHON="$PWD/.venv/bin/python"

step "browser for the dashboard tests"
bash scripts/browser-env.sh

step "tmux for the terminal UI test"
bash scripts/tty-env.sh

step "the pinned Codex CLI for the Codex tests (npm, cached)"
LEV_TEST_CODEX="$(bash scripts/codex-env.sh)"
export LEV_TEST_CODEX

step "the pinned Claude Code CLI for the Claude Code tests (npm, cached)"
LEV_TEST_CLAUDE_CODE="$(bash scripts/claude-code-env.sh)"
export LEV_TEST_CLAUDE_CODE

step "the pinned reference MCP servers for the lev mcp proxy tests (npm, cached)"
LEV_TEST_MCP_SERVERS="$(bash scripts/mcp-servers-env.sh)"
export LEV_TEST_MCP_SERVERS

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "cargo test: build"
cargo test --workspace --locked --no-run

# Most of the tests wait (for servers, deadlines, browsers, other
# processes) more than they compute, so the Rust tests run beside the suites
# that drive the built binary from outside. Each side writes its own log,
# printed whole when it ends, and the step fails if either did.
lev_bin="$PWD/target/debug/lev"
logs="$PWD/target/test-logs"
rm -rf "$logs"
mkdir -p "$logs"

rust_tests() {
  cargo test --workspace --locked
}

outside_tests() {
  local t0=$SECONDS
  say() { printf '\n--> [%4d s] %s\n' $((SECONDS - t0)) "$*"; }

  say "python sdk (python/): install, pytest against the lev binary, mypy --strict, ruff"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps ./python
  (
    cd python
    LEV_BIN="${LEV_BIN:-$lev_bin}" ../.venv/bin/python -m pytest -q -p no:cacheprovider
    ../.venv/bin/python -m mypy --strict lev
    ../.venv/bin/python -m ruff check lev tests examples
    ../.venv/bin/python -m ruff format --check lev tests examples
  )

  say "typescript sdk (typescript/): npm ci, tsc --strict, biome lint and format check, node:test against the lev binary"
  bash scripts/typescript-env.sh
  (
    cd typescript
    rm -rf dist
    ./node_modules/.bin/tsc -p tsconfig.json
    ./node_modules/.bin/biome lint --error-on-warnings .
    ./node_modules/.bin/biome format .
    LEV_BIN="${LEV_BIN:-$lev_bin}" node --test --test-concurrency=3 dist/test/*.test.js
  )

  say "packages: the wheel, the npm tarballs and the container image around target/debug/lev (podman)"
  bash scripts/package-test.sh "$lev_bin"

  say "the API against its own OpenAPI document (schemathesis)"
  bash scripts/api-check.sh "$lev_bin"

  if [ -f fuzz/Cargo.toml ]; then
    say "fuzz targets build (their own workspace and target dir)"
    cargo check --manifest-path fuzz/Cargo.toml --locked
  fi
  say "outside the Rust tests: ok"
}

step "cargo test, and beside it: the Python and TypeScript SDKs, the packages, the API check, the fuzz targets' build"
(set -e; rust_tests) >"$logs/rust.log" 2>&1 &
rust_pid=$!
(set -e; outside_tests) >"$logs/outside.log" 2>&1 &
outside_pid=$!
rust_status=0
wait "$rust_pid" || rust_status=$?
printf '\n==> cargo test (%s)\n' "$([ "$rust_status" = 0 ] && echo ok || echo "FAILED: exit $rust_status")"
cat "$logs/rust.log"
outside_status=0
wait "$outside_pid" || outside_status=$?
printf '\n==> outside the Rust tests (%s)\n' "$([ "$outside_status" = 0 ] && echo ok || echo "FAILED: exit $outside_status")"
cat "$logs/outside.log"
if [ "$rust_status" != 0 ] || [ "$outside_status" != 0 ]; then
  echo "test.sh: cargo test exit $rust_status, outside tests exit $outside_status" >&2
  exit 1
fi

# The benchmarks build in the test profile, beside the tests (their code is
# linted above with the rest); `cargo bench` builds them optimized when they
# are run. A release build here cost minutes and checked nothing more.
step "benchmarks build"
cargo test --workspace --locked --benches --no-run

step "done"
printf '\nwhere the time went:\n'
printf '%s\n' "${times[@]}"
printf '%5d s  in all\n' $((SECONDS - start))

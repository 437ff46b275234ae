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

step "the pinned reference MCP servers for the lev mcp proxy tests (npm, cached)"
LEV_TEST_MCP_SERVERS="$(bash scripts/mcp-servers-env.sh)"
export LEV_TEST_MCP_SERVERS

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "cargo test"
cargo test --workspace --locked

step "python sdk (python/): install, pytest against the lev binary, mypy --strict, ruff"
.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps ./python
(
  cd python
  LEV_BIN="${LEV_BIN:-$PWD/../target/debug/lev}" ../.venv/bin/python -m pytest -q -p no:cacheprovider
  ../.venv/bin/python -m mypy --strict lev
  ../.venv/bin/python -m ruff check lev tests examples
  ../.venv/bin/python -m ruff format --check lev tests examples
)

step "typescript sdk (typescript/): npm ci, tsc --strict, biome lint and format check, node:test against the lev binary"
bash scripts/typescript-env.sh
(
  cd typescript
  rm -rf dist
  ./node_modules/.bin/tsc -p tsconfig.json
  ./node_modules/.bin/biome lint --error-on-warnings .
  ./node_modules/.bin/biome format .
  LEV_BIN="${LEV_BIN:-$PWD/../target/debug/lev}" node --test --test-concurrency=3 dist/test/*.test.js
)

step "packages: the wheel, the npm tarballs and the container image around target/debug/lev (podman)"
bash scripts/package-test.sh "$PWD/target/debug/lev"

step "the API against its own OpenAPI document (schemathesis)"
bash scripts/api-check.sh "$PWD/target/debug/lev"

if [ -f fuzz/Cargo.toml ]; then
  step "fuzz targets build"
  cargo check --manifest-path fuzz/Cargo.toml --locked
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

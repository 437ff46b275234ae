#!/usr/bin/env bash
# Install the TypeScript SDK's pinned packages (typescript/package-lock.json:
# the compiler, the linter, @noble/curves, and the frameworks its adapters are
# tested against) with `npm ci`. Safe to run again, and quick when nothing
# changed: a stamp of the lock file in node_modules says what is installed.
#
# The TypeScript tests (scripts/test.sh) need Node.js 20.19 or later; they
# FAIL (never skip) without it or without these packages.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$root/typescript"

if ! command -v npm >/dev/null 2>&1; then
    bash "$root/scripts/apt-install.sh" typescript-env nodejs npm >&2
fi
node -e '
const [major, minor] = process.versions.node.split(".").map(Number);
if (major < 20 || (major === 20 && minor < 19)) {
  console.error(`typescript-env: Node.js ${process.versions.node} is too old: the SDK needs 20.19 or later`);
  process.exit(1);
}'

stamp="$dir/node_modules/.lev-lock-sha256"
want="$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "typescript env ready (node $(node --version), packages as locked)"
    exit 0
fi

# --include=optional: `ws` (the WebSocket on Node 20) and the linter's and
# compiler's platform binaries are optional dependencies.
(cd "$dir" && npm ci --no-audit --no-fund --include=optional --prefer-offline)
echo "$want" > "$stamp"
echo "typescript env ready (node $(node --version), packages installed from the lock file)"

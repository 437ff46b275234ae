#!/usr/bin/env bash
# Install the pinned reference MCP servers (npm `@modelcontextprotocol/
# server-everything` and `server-filesystem`, with every dependency pinned by
# scripts/mcp-servers/package-lock.json) once into a cache dir, check their
# versions, and print that dir on stdout (the last line; progress goes to
# stderr). Safe to run again: a cached install is only checked.
#
#   export LEV_TEST_MCP_SERVERS="$(bash scripts/mcp-servers-env.sh)"
#
# The `lev mcp proxy` tests (crates/lev-cli/tests/all/mcp_proxy.rs) run them
# as `node $LEV_TEST_MCP_SERVERS/node_modules/@modelcontextprotocol/...` and
# FAIL (never skip) without it. Env: LEV_MCP_SERVERS_CACHE (default
# ${XDG_CACHE_HOME:-~/.cache}/lev-mcp-servers).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
pins="$here/mcp-servers"
version="2026.8.31"
cache="${LEV_MCP_SERVERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lev-mcp-servers}"
# One install per lock file: a changed pin installs afresh.
lock_sum="$(sha256sum "$pins/package-lock.json" | cut -c1-16)"
prefix="$cache/$lock_sum"
scope="$prefix/node_modules/@modelcontextprotocol"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    bash "$here/apt-install.sh" mcp-servers-env nodejs npm >&2
fi

if [ ! -f "$scope/server-everything/dist/index.js" ] || [ ! -f "$scope/server-filesystem/dist/index.js" ]; then
    echo "mcp-servers-env: installing the pinned reference MCP servers into $prefix" >&2
    rm -rf "$prefix"
    mkdir -p "$prefix"
    cp "$pins/package.json" "$pins/package-lock.json" "$prefix/"
    (cd "$prefix" && npm ci --no-audit --no-fund >&2)
fi

for server in server-everything server-filesystem; do
    got="$(node -p "require('$scope/$server/package.json').version")"
    if [ "$got" != "$version" ]; then
        echo "mcp-servers-env: expected @modelcontextprotocol/$server $version in $prefix, found $got; remove $prefix and run this again" >&2
        exit 1
    fi
done
echo "mcp servers env ready: server-everything and server-filesystem $version (node $(node --version))" >&2
echo "$prefix"

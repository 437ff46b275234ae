#!/usr/bin/env bash
# Install the pinned Codex CLI (npm `@openai/codex`, whose platform binary,
# about 300 MB, comes as its optional dependency) once into a cache dir, check
# its version, and print the path of its native binary on stdout (the last
# line; progress goes to stderr). Safe to run again: a cached install is only
# checked.
#
#   export LEV_TEST_CODEX="$(bash scripts/codex-env.sh)"
#
# The Codex tests (crates/lev-cli/tests/all/agents/codex/) read LEV_TEST_CODEX
# and FAIL (never skip) without it. Env: LEV_CODEX_CACHE (default
# ${XDG_CACHE_HOME:-~/.cache}/lev-codex).
set -euo pipefail

version="0.171.0"
cache="${LEV_CODEX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lev-codex}"
prefix="$cache/$version"

case "$(uname -s)-$(uname -m)" in
    Linux-x86_64)  pkg=codex-linux-x64;   triple=x86_64-unknown-linux-musl ;;
    Linux-aarch64) pkg=codex-linux-arm64; triple=aarch64-unknown-linux-musl ;;
    *) echo "codex-env: no pinned Codex for $(uname -s) $(uname -m)" >&2; exit 1 ;;
esac
bin="$prefix/node_modules/@openai/$pkg/vendor/$triple/bin/codex"

if [ ! -x "$bin" ]; then
    if ! command -v npm >/dev/null 2>&1; then
        bash "$(dirname "$0")/apt-install.sh" codex-env nodejs npm >&2
    fi
    echo "codex-env: installing @openai/codex@$version into $prefix" >&2
    mkdir -p "$prefix"
    # --save-exact: npm would otherwise write "^$version" into package.json.
    # --include=optional: the binary is an optional dependency, which an npm
    # configured to omit them (omit=optional, NODE_ENV=production...) skips.
    npm install --prefix "$prefix" --no-audit --no-fund --save-exact \
        --include=optional "@openai/codex@$version" >&2
fi

# The "version" of an installed package.json, or "not installed".
version_of() {
    if [ -f "$1" ]; then
        sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$1" | head -n 1
    else
        echo "not installed"
    fi
}

if [ ! -x "$bin" ]; then
    {
        echo "codex-env: no Codex binary at $bin"
        echo "  found @openai/codex $(version_of "$prefix/node_modules/@openai/codex/package.json") (expected $version)"
        echo "  found @openai/$pkg, its optional platform package, $(version_of "$prefix/node_modules/@openai/$pkg/package.json") (expected $version-${pkg#codex-})"
        echo "  npm omits: $(npm config get omit 2>/dev/null || echo '?'); remove $prefix and run this again"
    } >&2
    exit 1
fi

got="$("$bin" --version)"
if [ "$got" != "codex-cli $version" ]; then
    echo "codex-env: expected codex-cli $version at $bin, found: $got" >&2
    exit 1
fi
echo "codex env ready: $got" >&2
echo "$bin"

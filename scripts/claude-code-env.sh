#!/usr/bin/env bash
# Install the pinned Claude Code CLI (npm `@anthropic-ai/claude-code`, whose
# native binary, about 230 MB, comes as its optional platform dependency) once
# into a cache dir, check its version, and print the path of that binary on
# stdout (the last line; progress goes to stderr). Safe to run again: a cached
# install is only checked.
#
#   export LEV_TEST_CLAUDE_CODE="$(bash scripts/claude-code-env.sh)"
#
# The Claude Code tests (crates/lev-cli/tests/all/agents/claude_code.rs) run
# it offline against a fake Anthropic Messages API, and FAIL (never skip)
# without it. Env: LEV_CLAUDE_CODE_CACHE (default
# ${XDG_CACHE_HOME:-~/.cache}/lev-claude-code).
set -euo pipefail

version="2.1.332"
cache="${LEV_CLAUDE_CODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/lev-claude-code}"
prefix="$cache/$version"

case "$(uname -s)-$(uname -m)" in
    Linux-x86_64)  pkg=claude-code-linux-x64 ;;
    Linux-aarch64) pkg=claude-code-linux-arm64 ;;
    *) echo "claude-code-env: no pinned Claude Code for $(uname -s) $(uname -m)" >&2; exit 1 ;;
esac
bin="$prefix/node_modules/@anthropic-ai/$pkg/claude"

if [ ! -x "$bin" ]; then
    if ! command -v npm >/dev/null 2>&1; then
        bash "$(dirname "$0")/apt-install.sh" claude-code-env nodejs npm >&2
    fi
    echo "claude-code-env: installing @anthropic-ai/claude-code@$version into $prefix" >&2
    mkdir -p "$prefix"
    # The native binary is the platform package itself: the wrapper's
    # install script (which wants a newer Node.js) is not needed, so npm's
    # refusal to run it is harmless. --include=optional: an npm configured
    # to omit optional dependencies would skip the binary.
    npm install --prefix "$prefix" --no-audit --no-fund --save-exact \
        --include=optional "@anthropic-ai/claude-code@$version" >&2
fi

if [ ! -x "$bin" ]; then
    echo "claude-code-env: no Claude Code binary at $bin; remove $prefix and run this again" >&2
    exit 1
fi

got="$("$bin" --version)"
if [ "$got" != "$version (Claude Code)" ]; then
    echo "claude-code-env: expected $version (Claude Code) at $bin, found: $got" >&2
    exit 1
fi
echo "claude code env ready: $got" >&2
echo "$bin"

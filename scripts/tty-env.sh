#!/usr/bin/env bash
# Make sure tmux is installed: `lev watch`'s end-to-end test runs it in a real
# pseudo-terminal through tmux (crates/lev-cli/tests/all/watch.rs). Safe to
# run again; does nothing when tmux is there. The test fails, never skips,
# without it.
set -euo pipefail

if command -v tmux >/dev/null 2>&1; then
    echo "tty env ready: $(tmux -V)"
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    run() { "$@"; }
elif command -v sudo >/dev/null 2>&1; then
    run() { sudo -n "$@"; }
else
    echo "tty-env: tmux is missing, and this user cannot install packages (not root, no sudo)." >&2
    echo "tty-env: install it with: apt-get install -y tmux" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
if ! run apt-get install -y --no-install-recommends tmux; then
    run apt-get update
    run apt-get install -y --no-install-recommends tmux
fi

if ! command -v tmux >/dev/null 2>&1; then
    echo "tty-env: tmux still not on PATH after installing" >&2
    exit 1
fi
echo "tty env ready: $(tmux -V)"

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

bash "$(dirname "$0")/apt-install.sh" tty-env tmux

if ! command -v tmux >/dev/null 2>&1; then
    echo "tty-env: tmux still not on PATH after installing" >&2
    exit 1
fi
echo "tty env ready: $(tmux -V)"

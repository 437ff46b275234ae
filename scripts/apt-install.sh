#!/usr/bin/env bash
# Install Debian packages for the test suite: `apt-install.sh WHO PACKAGE...`.
# As root directly, else through passwordless sudo; tries the package lists
# as they are and refreshes them only when that fails. WHO names the caller
# in messages. Run by the *-env.sh scripts when their tools are missing.
set -euo pipefail

who="$1"
shift

if [ "$(id -u)" -eq 0 ]; then
    run() { "$@"; }
elif command -v sudo >/dev/null 2>&1; then
    run() { sudo -n "$@"; }
else
    echo "$who: $* missing, and this user cannot install packages (not root, no sudo)." >&2
    echo "$who: install with: apt-get install -y $*" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
if ! run apt-get install -y --no-install-recommends "$@"; then
    run apt-get update
    run apt-get install -y --no-install-recommends "$@"
fi

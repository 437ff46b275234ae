#!/usr/bin/env bash
# Make sure podman and runc are installed (Debian's `podman` and `runc`):
# the packaging test (scripts/package-test.sh) builds the container image
# with podman and runs it. Safe to run again; does nothing when both are
# there. The test fails, never skips, without them.
set -euo pipefail

have() {
    command -v podman >/dev/null 2>&1 && command -v runc >/dev/null 2>&1
}

if ! have; then
    bash "$(dirname "$0")/apt-install.sh" podman-env podman runc
fi
if ! have; then
    echo "podman-env: podman or runc still not on PATH after installing" >&2
    exit 1
fi
echo "podman env ready: $(podman --version), $(runc --version | head -n 1)"

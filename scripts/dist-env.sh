#!/usr/bin/env bash
# What scripts/dist.sh needs to build static binaries: the Rust targets
# x86_64-unknown-linux-musl and aarch64-unknown-linux-musl (rustup), and a C
# toolchain for each (ring's and SQLite's C parts): cargo-zigbuild with Zig,
# both pinned, from PyPI into a venv of their own. Safe to run again; prints
# the venv's bin dir (put it on PATH) as its last line.
#
#   PATH="$(bash scripts/dist-env.sh):$PATH"
#
# Env: LEV_DIST_TOOLS (default ${XDG_CACHE_HOME:-~/.cache}/lev-dist-tools).
set -euo pipefail

ziglang_version="0.15.1"
zigbuild_version="0.24.1"
venv="${LEV_DIST_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/lev-dist-tools}"

installed="$(rustup target list --installed)"
for target in x86_64-unknown-linux-musl aarch64-unknown-linux-musl; do
    if ! grep -qx "$target" <<<"$installed"; then
        echo "dist-env: rustup target add $target" >&2
        rustup target add "$target" >&2
    fi
done

if ! "$venv/bin/python" -c "import ziglang" >/dev/null 2>&1 \
    || [ "$("$venv/bin/cargo-zigbuild" --version 2>/dev/null)" != "cargo-zigbuild $zigbuild_version" ] \
    || [ "$("$venv/bin/python" -m ziglang version 2>/dev/null)" != "$ziglang_version" ]; then
    echo "dist-env: installing ziglang $ziglang_version and cargo-zigbuild $zigbuild_version into $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        "ziglang==$ziglang_version" "cargo-zigbuild==$zigbuild_version" >&2
fi
echo "dist env ready: zig $("$venv/bin/python" -m ziglang version), $("$venv/bin/cargo-zigbuild" --version)" >&2
echo "$venv/bin"

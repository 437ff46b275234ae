#!/usr/bin/env bash
# Build everything people download into dist/ (gitignored):
#
#   lev-VERSION-TRIPLE.tar.gz    the static binary (and README.md), per platform
#   lev_sdk-VERSION-py3-none-<linux tags>.whl
#                                the Python SDK and the `lev` command, per platform
#   lev_sdk-VERSION-py3-none-any.whl
#                                the Python SDK alone (other systems)
#   lev-cli-VERSION.tgz          npm: the launcher
#   lev-cli-linux-ARCH-VERSION.tgz
#                                npm: @lev-cli/linux-ARCH, the binary
#   lev-image-VERSION-ARCH.tar   the container image (docker-archive), when
#                                podman is installed
#   SHA256SUMS
#
# Usage:
#   scripts/dist.sh                        static builds for x86_64 and aarch64
#   scripts/dist.sh --arch x86_64          one platform
#   scripts/dist.sh --binary PATH [--arch A]
#                                          package a binary already built (the
#                                          tests package target/debug/lev:
#                                          no compile)
#   --out DIR      instead of dist/
#   --no-image     skip the container image
#
# Env: LEV_IMAGE, the image's name in podman's storage (default
# localhost/lev; tagged VERSION-ARCH).
#
# Static builds: `cargo build --profile dist` for TRIPLE-unknown-linux-musl,
# the C parts (ring, SQLite) compiled by musl-gcc (Debian's musl-tools) for
# x86_64 when present, else by Zig through cargo-zigbuild (scripts/dist-env.sh
# installs both targets and the Zig tools). Each binary must be static and at
# most 25 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

out="$root/dist"
binary=""
arches=()
image=1
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out="$(mkdir -p "$2" && cd "$2" && pwd)"; shift 2 ;;
        --binary) binary="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"; shift 2 ;;
        --arch) arches+=("$2"); shift 2 ;;
        --no-image) image=0; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "dist.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'dist.sh: %s\n' "$*" >&2; exit 1; }

# One version everywhere: the workspace's, pyproject's and npm's.
version="$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)"
py_version="$(sed -n 's/^version = "\(.*\)"/\1/p' python/pyproject.toml)"
npm_version="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' npm/lev-cli/package.json)"
[ -n "$version" ] || die "no version in Cargo.toml's [workspace.package]"
[ "$py_version" = "$version" ] || die "expected python/pyproject.toml at version $version, found $py_version"
[ "$npm_version" = "$version" ] || die "expected npm/lev-cli/package.json at version $version, found $npm_version"

host_arch="$(uname -m)"
if [ ${#arches[@]} -eq 0 ]; then
    if [ -n "$binary" ]; then arches=("$host_arch"); else arches=(x86_64 aarch64); fi
fi
if [ -n "$binary" ] && [ ${#arches[@]} -ne 1 ]; then
    die "--binary packages one binary: give at most one --arch"
fi
for arch in "${arches[@]}"; do
    case "$arch" in x86_64|aarch64) ;; *) die "--arch: expected x86_64 or aarch64, found $arch" ;; esac
done

# Static: an ELF without a program interpreter (PT_INTERP), so no dynamic
# loader and no shared library is needed (static-pie binaries included).
is_static() {
    python3 - "$1" <<'EOF'
import struct, sys
data = open(sys.argv[1], "rb").read(65536)
if data[:4] != b"\x7fELF" or data[4] != 2:
    sys.exit(1)
end = "<" if data[5] == 1 else ">"
phoff, = struct.unpack_from(end + "Q", data, 0x20)
phentsize, phnum = struct.unpack_from(end + "HH", data, 0x36)
types = [struct.unpack_from(end + "I", data, phoff + i * phentsize)[0] for i in range(phnum)]
sys.exit(1 if 3 in types else 0)
EOF
}

max_bytes=$((25 * 1024 * 1024))
mkdir -p "$out"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The static binary for $1 (an arch): built, checked, its path printed.
build_static() {
    local arch="$1" triple="$1-unknown-linux-musl"
    local tools
    tools="$(bash scripts/dist-env.sh)"
    if [ "$arch" = x86_64 ] && command -v musl-gcc >/dev/null 2>&1; then
        say "cargo build --profile dist --target $triple (C parts: musl-gcc)"
        CC_x86_64_unknown_linux_musl=musl-gcc \
            cargo build --locked --profile dist --target "$triple" -p lev-cli >&2
    else
        say "cargo zigbuild --profile dist --target $triple (C parts: zig cc)"
        PATH="$tools:$PATH" cargo zigbuild --locked --profile dist --target "$triple" -p lev-cli >&2
    fi
    local built="target/$triple/dist/lev"
    if ! is_static "$built"; then
        die "$built: expected a static binary, found one that needs a dynamic loader"
    fi
    echo "$root/$built"
}

declare -A bins
for arch in "${arches[@]}"; do
    if [ -n "$binary" ]; then
        [ -x "$binary" ] || die "--binary: $binary is not an executable file"
        bins[$arch]="$binary"
    else
        bins[$arch]="$(build_static "$arch")"
    fi
    size=$(stat -c %s "${bins[$arch]}")
    say "$arch: ${bins[$arch]}: $size bytes ($(is_static "${bins[$arch]}" && echo static || echo dynamic))"
    if [ -z "$binary" ] && [ "$size" -gt "$max_bytes" ]; then
        die "${bins[$arch]}: $size bytes, more than 25 MiB"
    fi
done
if [ -n "$binary" ] && ! is_static "$binary"; then
    say "note: $binary is not static: packaged for tests only (the image copies its shared libraries)"
fi

made=()
for arch in "${arches[@]}"; do
    triple="$arch-unknown-linux-musl"
    name="lev-$version-$triple"
    say "$name.tar.gz"
    mkdir -p "$work/$name"
    cp "${bins[$arch]}" "$work/$name/lev"
    cp README.md "$work/$name/"
    tar -C "$work" --owner=0 --group=0 --numeric-owner --mtime=@0 --sort=name \
        -czf "$out/$name.tar.gz" "$name"
    made+=("$name.tar.gz")

    say "wheel ($arch)"
    made+=("$(basename "$(python3 scripts/dist/wheel.py --out "$out" --binary "${bins[$arch]}" --arch "$arch")")")

    say "npm @lev-cli/linux-* ($arch)"
    made+=("$(basename "$(python3 scripts/dist/npm.py --out "$out" --binary "${bins[$arch]}" --arch "$arch")")")
done
say "wheel (pure)"
made+=("$(basename "$(python3 scripts/dist/wheel.py --out "$out")")")
say "npm lev-cli"
made+=("$(basename "$(python3 scripts/dist/npm.py --out "$out" --launcher)")")

if [ "$image" = 1 ] && command -v podman >/dev/null 2>&1; then
    # The context of the Dockerfile's rootfs-prebuilt stage: per platform the
    # image's files; data/ the volume's first (empty) contents.
    ctx="$work/image"
    mkdir -p "$ctx/data"
    for arch in "${arches[@]}"; do
        case "$arch" in x86_64) oci=amd64 ;; aarch64) oci=arm64 ;; esac
        rootfs="$ctx/$oci"
        mkdir -p "$rootfs/usr/local/bin" "$rootfs/etc/ssl/certs" "$rootfs/tmp"
        chmod 1777 "$rootfs/tmp"
        cp "${bins[$arch]}" "$rootfs/usr/local/bin/lev"
        if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
            cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/"
        else
            say "note: no /etc/ssl/certs/ca-certificates.crt here: the image gets no CA bundle (outbound HTTPS will fail)"
        fi
        if ! is_static "${bins[$arch]}"; then
            # A dynamic (test) binary: its loader and libraries too.
            ldd "${bins[$arch]}" | grep -o '/[^ ]*' | while read -r lib; do
                mkdir -p "$rootfs$(dirname "$lib")"
                cp -L "$lib" "$rootfs$lib"
            done
        fi
        tag="${LEV_IMAGE:-localhost/lev}:$version-$oci"
        say "image $tag (podman build, the Dockerfile's final stage around the binary)"
        podman build --quiet --format docker --arch "$oci" \
            --build-arg ROOTFS=rootfs-prebuilt --build-arg TARGETARCH="$oci" \
            -f Dockerfile -t "$tag" "$ctx" >&2
        rm -f "$out/lev-image-$version-$oci.tar"
        podman save --quiet --format docker-archive -o "$out/lev-image-$version-$oci.tar" "$tag"
        made+=("lev-image-$version-$oci.tar")
    done
elif [ "$image" = 1 ]; then
    say "no podman: no container image (apt-get install podman runc)"
fi

say "SHA256SUMS"
(cd "$out" && sha256sum "${made[@]}" > SHA256SUMS)
for f in "${made[@]}" SHA256SUMS; do
    printf '%s\t%s\n' "$(stat -c %s "$out/$f")" "$out/$f"
done

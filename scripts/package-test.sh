#!/usr/bin/env bash
# The packaging test: scripts/dist.sh packages an already-built `lev` (no
# compile; default target/debug/lev, stripped of its debug info to keep the
# packages small) and each package is installed and run the way a newcomer
# would:
#
# - the wheel, in a fresh venv: `lev` is the binary, `lev --version`, `lev
#   demo` until its first question, and the SDK (`import lev`, from the venv)
#   against that demo;
# - the npm tarballs, in a fresh folder, offline with an empty cache: `npx lev
#   --version`, `npx lev-cli demo` until its first question;
# - the container image (the Dockerfile's final stage around the binary),
#   under podman: runs as 65532 with /data its volume, owned by 65532,
#   healthy by its own HEALTHCHECK (`lev health`), answers on the published
#   port, `lev` inside it reads the admin token of the volume, stops
#   gracefully on SIGTERM; and `lev demo` in it until its first question.
#
# What it cannot prove: that the musl build is static and small (dist.sh
# checks that when it builds; see the README), nor the arm64 packages.
# Fails, never skips, when podman, npm or Python are missing.
#
#   bash scripts/package-test.sh [--as-is] [BINARY]
#
# --as-is packages BINARY unstripped (a static release build, tested by hand).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
started=$SECONDS
as_is=""
if [ "${1:-}" = "--as-is" ]; then as_is=1; shift; fi
binary="${1:-$root/target/debug/lev}"

say() { printf '==> [%3d s] %s\n' "$((SECONDS - started))" "$*"; }
die() { printf 'package-test: %s\n' "$*" >&2; exit 1; }

[ -x "$binary" ] || die "no lev binary at $binary: build it with cargo build -p lev-cli"
command -v npm >/dev/null 2>&1 || bash scripts/apt-install.sh package-test nodejs npm
bash scripts/podman-env.sh

version="$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)"
tmp="$(mktemp -d)"
name="lev-package-test-$$"
image="localhost/$name:$version-amd64"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill -KILL -- "-$pid" 2>/dev/null || true; done
    podman rm -f -v "$name" "$name-demo" >/dev/null 2>&1 || true
    podman volume rm -f "$name-data" >/dev/null 2>&1 || true
    podman rmi -f "$image" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT

# podman as root here: runc, and the open-files limit this machine allows
# (podman's default, 1048576, needs CAP_SYS_RESOURCE; nproc then must be set
# too). Its healthcheck timers need systemd, absent here: the test runs the
# health check itself (podman healthcheck run), so those complaints are
# filtered out.
podman_() {
    podman --runtime runc "$@" 2> >(grep -v 'systemd' >&2)
}
ulimits=(--ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=32768:32768)

# Start "$@" in its own process group with stdout and stderr in $log, and
# wait until it prints its first question; sets demo_pid.
start_demo() {
    local log="$1"
    shift
    : >"$log"
    setsid "$@" >"$log" 2>&1 &
    demo_pid=$!
    pids+=("$demo_pid")
    for _ in $(seq 1 120); do
        grep -q "agent asks" "$log" && return 0
        kill -0 "$demo_pid" 2>/dev/null || break
        sleep 0.25
    done
    cat "$log" >&2
    die "no first question from: $*"
}

# SIGINT to the demo's process group (as Ctrl-C would), then its goodbye.
stop_demo() {
    local log="$1"
    kill -INT -- "-$demo_pid"
    for _ in $(seq 1 40); do
        kill -0 "$demo_pid" 2>/dev/null || break
        sleep 0.25
    done
    grep -q "lev demo: stopped; removed" "$log" || { cat "$log" >&2; die "the demo did not stop cleanly"; }
}

cp "$binary" "$tmp/lev"
if [ -n "$as_is" ]; then
    say "dist.sh --binary $binary"
else
    say "dist.sh --binary (stripped copy of $binary)"
    strip "$tmp/lev" 2>/dev/null || true
fi
LEV_IMAGE="localhost/$name" bash scripts/dist.sh --binary "$tmp/lev" --arch x86_64 --out "$tmp/dist" >"$tmp/dist.log" 2>&1 \
    || { cat "$tmp/dist.log" >&2; die "dist.sh failed"; }
(cd "$tmp/dist" && sha256sum --check --quiet SHA256SUMS) || die "SHA256SUMS does not match"
for whl in "$tmp"/dist/*.whl; do python3 scripts/dist/wheel.py --check "$whl"; done

say "wheel: a fresh venv, pip install, lev --version, lev demo, the SDK"
wheel="$(ls "$tmp"/dist/lev_sdk-"$version"-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.musllinux_1_2_x86_64.whl)"
python3 -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install --quiet --disable-pip-version-check "$wheel"
cmp "$tmp/venv/bin/lev" "$tmp/lev" || die "the venv's lev is not the packaged binary"
[ "$("$tmp/venv/bin/lev" --version)" = "lev $version" ] || die "venv lev --version: $("$tmp/venv/bin/lev" --version)"
start_demo "$tmp/demo-wheel.log" "$tmp/venv/bin/lev" demo --listen 127.0.0.1:0
export_line="$(grep -m1 'export LEV_URL=' "$tmp/demo-wheel.log")"
url="$(sed 's/.*LEV_URL=\([^ ]*\).*/\1/' <<<"$export_line")"
token="$(sed 's/.*LEV_TOKEN=\([^ ]*\).*/\1/' <<<"$export_line")"
(
    cd "$tmp"
    LEV_URL="$url" LEV_TOKEN="$token" VENV="$tmp/venv" "$tmp/venv/bin/python" - <<'EOF'
import os

import lev

assert lev.__file__.startswith(os.environ["VENV"]), lev.__file__
client = lev.Client(os.environ["LEV_URL"], os.environ["LEV_TOKEN"])
health = client.health()
assert health["status"] == "ok", health
page = client.list_interactions()
assert page["items"], "expected the demo's question pending"
print(f"sdk: lev {health['version']} answers; {len(page['items'])} pending")
EOF
)
stop_demo "$tmp/demo-wheel.log"

say "npm: the tarballs in a fresh folder, offline, empty cache; npx lev, npx lev-cli demo"
mkdir -p "$tmp/app"
printf '{"name":"app","version":"1.0.0","private":true}\n' >"$tmp/app/package.json"
(
    cd "$tmp/app"
    npm install --offline --cache "$tmp/npm-cache" --no-audit --no-fund --loglevel=error \
        "$tmp/dist/lev-cli-$version.tgz" "$tmp/dist/lev-cli-linux-x64-$version.tgz"
    [ "$(npx --offline --cache "$tmp/npm-cache" lev --version)" = "lev $version" ] || die "npx lev --version"
    cmp node_modules/@lev-cli/linux-x64/bin/lev "$tmp/lev" || die "the npm package's lev is not the packaged binary"
)
(cd "$tmp/app" && start_demo "$tmp/demo-npm.log" npx --offline --cache "$tmp/npm-cache" lev-cli demo --listen 127.0.0.1:0 && stop_demo "$tmp/demo-npm.log")

say "image: podman run, user, volume, health check, lev inside, SIGTERM; lev demo in it"
podman_ run "${ulimits[@]}" -d --name "$name" -p 127.0.0.1::7420 -v "$name-data:/data" "$image" >/dev/null
port="$(podman port "$name" 7420/tcp | sed 's/.*://')"
healthy=""
for _ in $(seq 1 40); do
    if podman_ healthcheck run "$name" >/dev/null 2>&1; then healthy=1; break; fi
    sleep 0.25
done
[ -n "$healthy" ] || { podman logs "$name" >&2; die "the container never became healthy"; }
"$tmp/lev" health --url "http://127.0.0.1:$port" || die "no answer on the published port $port"
podman logs "$name" 2>&1 | grep "dashboard: http://" >/dev/null || die "no dashboard link in the container's log"
pid="$(podman inspect --format '{{.State.Pid}}' "$name")"
[ "$(stat -c %u:%g "/proc/$pid")" = "65532:65532" ] || die "lev runs as $(stat -c %u:%g "/proc/$pid"), expected 65532:65532"
volume="$(podman volume inspect --format '{{.Mountpoint}}' "$name-data")"
[ "$(stat -c %u:%g "$volume")" = "65532:65532" ] || die "the volume is owned by $(stat -c %u:%g "$volume")"
[ "$(stat -c %u "$volume/admin.token")" = "65532" ] || die "admin.token is not lev's"
podman_ exec "$name" lev ls | grep "nothing pending" >/dev/null || die "lev ls in the container"
podman_ exec "$name" lev token create alice --role approver | grep "lev_" >/dev/null || die "lev token create in the container"
podman_ stop --time 10 "$name" >/dev/null
[ "$(podman inspect --format '{{.State.ExitCode}}' "$name")" = 0 ] || die "lev serve did not stop cleanly on SIGTERM"

podman_ run "${ulimits[@]}" -d --name "$name-demo" "$image" demo >/dev/null
for _ in $(seq 1 120); do
    podman logs "$name-demo" >"$tmp/demo-image.log" 2>&1
    grep -q "agent asks" "$tmp/demo-image.log" && break
    sleep 0.25
done
grep -q "agent asks" "$tmp/demo-image.log" || { cat "$tmp/demo-image.log" >&2; die "no first question from lev demo in the image"; }
podman_ stop --time 10 "$name-demo" >/dev/null
podman logs "$name-demo" >"$tmp/demo-image.log" 2>&1
grep -q "lev demo: stopped; removed" "$tmp/demo-image.log" || { cat "$tmp/demo-image.log" >&2; die "lev demo in the image did not stop cleanly"; }

say "packages ok in $((SECONDS - started)) s"

#!/usr/bin/env python3
"""Pack lev's npm packages the way esbuild and @biomejs/biome ship theirs.

    npm.py --out DIR --launcher                      # lev-cli-VERSION.tgz
    npm.py --out DIR --binary PATH --arch x86_64     # lev-cli-linux-x64-VERSION.tgz

`lev-cli` (npm/lev-cli/) is the launcher: a small bin script that finds the
binary in this platform's package and runs it. Each platform package
(`@lev-cli/linux-x64`, `@lev-cli/linux-arm64`) carries one static binary and
declares `os` and `cpu`, so npm installs only the one that fits among
lev-cli's optionalDependencies. They declare no `libc`: the binary is static
(musl, linked in), so the same package runs on glibc and musl systems alike,
and a `libc` field would only keep it from one of them.

Needs npm (`npm pack`). Prints the tarball's path.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = ROOT / "npm" / "lev-cli"

# Rust's arch names to Node's process.arch.
NODE_ARCH = {"x86_64": "x64", "aarch64": "arm64"}


def launcher_manifest() -> dict:
    return json.loads((LAUNCHER / "package.json").read_text())


def platform_manifest(arch: str) -> dict:
    launcher = launcher_manifest()
    node_arch = NODE_ARCH[arch]
    name = f"@lev-cli/linux-{node_arch}"
    wanted = launcher.get("optionalDependencies", {}).get(name)
    if wanted != launcher["version"]:
        sys.exit(
            f"npm.py: expected lev-cli to depend on {name} {launcher['version']}, "
            f"found {wanted!r} in npm/lev-cli/package.json"
        )
    return {
        "name": name,
        "version": launcher["version"],
        "description": f"The lev binary for Linux {node_arch} (static): the `lev` command of lev-cli",
        "license": launcher["license"],
        "os": ["linux"],
        "cpu": [node_arch],
        "files": ["bin/lev", "README.md"],
        "preferUnplugged": True,
    }


def pack(package_dir: Path, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        ["npm", "pack", "--json", "--pack-destination", str(out.resolve())],
        cwd=package_dir,
        check=True,
        capture_output=True,
        text=True,
    )
    filename = json.loads(result.stdout)[0]["filename"]
    return out / filename


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--launcher", action="store_true")
    parser.add_argument("--binary", type=Path)
    parser.add_argument("--arch", choices=sorted(NODE_ARCH))
    args = parser.parse_args()
    if args.launcher == (args.binary is not None) or (args.binary is None) != (args.arch is None):
        parser.error("either --launcher, or --binary with --arch")
    if shutil.which("npm") is None:
        sys.exit("npm.py: npm not found (Debian: apt-get install npm)")
    with tempfile.TemporaryDirectory(prefix="lev-npm-") as tmp:
        stage = Path(tmp) / "package"
        if args.launcher:
            shutil.copytree(LAUNCHER, stage)
        else:
            manifest = platform_manifest(args.arch)
            (stage / "bin").mkdir(parents=True)
            shutil.copy2(args.binary, stage / "bin" / "lev")
            (stage / "bin" / "lev").chmod(0o755)
            (stage / "package.json").write_text(json.dumps(manifest, indent=2) + "\n")
            (stage / "README.md").write_text(
                f"# {manifest['name']}\n\n"
                f"The `lev` binary for Linux {manifest['cpu'][0]}, statically linked. "
                "Install [lev-cli](https://www.npmjs.com/package/lev-cli), which "
                "depends on this package where it fits and runs it as `lev`.\n"
            )
        print(pack(stage, args.out))


if __name__ == "__main__":
    main()

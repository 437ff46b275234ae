#!/usr/bin/env python3
"""Build lev-sdk's wheels without a build backend: the SDK (python/lev) and,
for a platform wheel, the `lev` binary as the wheel's script.

    wheel.py --out DIR [--binary PATH --arch x86_64|aarch64]

With --binary: `lev_sdk-VERSION-py3-none-<platform tags>.whl`, whose
`lev_sdk-VERSION.data/scripts/lev` is the binary, so that `pip install
lev-sdk` (or `pipx install lev-sdk`) puts `lev` on PATH beside the SDK. The
layout is the one maturin's `bindings = "bin"` and ruff's wheels have; the
tags say "any CPython 3, no ABI, this Linux": manylinux 2.17 (glibc) and
musllinux 1.2 (musl), which a static musl binary satisfies both.

Without --binary: the pure `py3-none-any` wheel (the SDK alone), which pip
picks where no platform wheel fits (macOS, Windows).

METADATA comes from python/pyproject.toml and python/README.md; RECORD holds
every file's SHA-256 and size. Only the standard library (Python >= 3.11 for
tomllib). The output is reproducible: fixed timestamps, sorted entries.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import stat
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHON = ROOT / "python"

# ruff's tags: any CPython 3 interpreter, no ABI, glibc >= 2.17 or musl >= 1.2.
PLATFORM_TAGS = {
    "x86_64": [
        "manylinux_2_17_x86_64",
        "manylinux2014_x86_64",
        "musllinux_1_2_x86_64",
    ],
    "aarch64": [
        "manylinux_2_17_aarch64",
        "manylinux2014_aarch64",
        "musllinux_1_2_aarch64",
    ],
}

# 1980-01-01, the earliest time a zip entry can hold: reproducible wheels.
EPOCH = (1980, 1, 1, 0, 0, 0)


def metadata(project: dict, readme: str) -> str:
    """Core metadata 2.1 from pyproject's [project] table."""
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {project['version']}",
        f"Summary: {project['description']}",
    ]
    license_ = project.get("license", {})
    if isinstance(license_, dict) and "text" in license_:
        lines.append(f"License: {license_['text']}")
    for label, url in project.get("urls", {}).items():
        lines.append(f"Project-URL: {label}, {url}")
    for classifier in project.get("classifiers", []):
        lines.append(f"Classifier: {classifier}")
    lines.append(f"Requires-Python: {project['requires-python']}")
    for dep in project.get("dependencies", []):
        lines.append(f"Requires-Dist: {dep}")
    for extra, deps in project.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        for dep in deps:
            lines.append(f'Requires-Dist: {dep}; extra == "{extra}"')
    lines.append("Description-Content-Type: text/markdown")
    return "\n".join(lines) + "\n\n" + readme


def record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode()


def package_files(project_toml: dict) -> list[tuple[str, Path]]:
    """The SDK's files as setuptools packages them: every module of the
    listed packages and their package data."""
    tool = project_toml.get("tool", {}).get("setuptools", {})
    files: list[tuple[str, Path]] = []
    for package in tool.get("packages", []):
        directory = PYTHON / package.replace(".", "/")
        patterns = ["*.py", *tool.get("package-data", {}).get(package, [])]
        found = {p for pattern in patterns for p in directory.glob(pattern) if p.is_file()}
        for path in sorted(found):
            files.append((path.relative_to(PYTHON).as_posix(), path))
    if not files:
        sys.exit("wheel.py: no package files found under python/")
    return files


def build(out: Path, binary: Path | None, arch: str | None) -> Path:
    pyproject = tomllib.loads((PYTHON / "pyproject.toml").read_text())
    project = pyproject["project"]
    name = project["name"].replace("-", "_")
    version = project["version"]
    readme = (PYTHON / project.get("readme", "README.md")).read_text()
    if binary is None:
        tags = ["py3-none-any"]
        purelib = True
    else:
        tags = [f"py3-none-{platform}" for platform in PLATFORM_TAGS[arch]]
        purelib = False
    tag = "py3-none-" + ".".join(t.removeprefix("py3-none-") for t in tags)
    wheel_name = f"{name}-{version}-{tag}.whl"
    dist_info = f"{name}-{version}.dist-info"
    entries: list[tuple[str, bytes, int]] = []
    for arcname, path in package_files(pyproject):
        entries.append((arcname, path.read_bytes(), 0o644))
    if binary is not None:
        entries.append((f"{name}-{version}.data/scripts/lev", binary.read_bytes(), 0o755))
    wheel_file = (
        "Wheel-Version: 1.0\n"
        "Generator: lev scripts/dist/wheel.py\n"
        f"Root-Is-Purelib: {'true' if purelib else 'false'}\n"
        + "".join(f"Tag: {t}\n" for t in tags)
    )
    entries.append((f"{dist_info}/METADATA", metadata(project, readme).encode(), 0o644))
    entries.append((f"{dist_info}/WHEEL", wheel_file.encode(), 0o644))
    record_name = f"{dist_info}/RECORD"
    record = "".join(f"{arc},{record_hash(data)},{len(data)}\n" for arc, data, _ in entries)
    record += f"{record_name},,\n"
    entries.append((record_name, record.encode(), 0o644))

    out.mkdir(parents=True, exist_ok=True)
    target = out / wheel_name
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for arcname, data, mode in entries:
            info = zipfile.ZipInfo(arcname, date_time=EPOCH)
            info.external_attr = (stat.S_IFREG | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return target


def check(wheel: Path) -> None:
    """Every RECORD line names a file of the wheel with its hash and size,
    and every file is in RECORD."""
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        record_name = next(n for n in names if n.endswith(".dist-info/RECORD"))
        listed = set()
        for line in zf.read(record_name).decode().splitlines():
            arc, digest, size = line.rsplit(",", 2)
            listed.add(arc)
            if arc == record_name:
                continue
            data = zf.read(arc)
            if digest != record_hash(data) or int(size) != len(data):
                sys.exit(f"wheel.py: {wheel.name}: RECORD does not match {arc}")
        if listed != names:
            sys.exit(f"wheel.py: {wheel.name}: RECORD and the files differ: {listed ^ names}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--binary", type=Path)
    parser.add_argument("--arch", choices=sorted(PLATFORM_TAGS))
    parser.add_argument("--check", type=Path, help="only check the RECORD of this wheel")
    args = parser.parse_args()
    if args.check:
        check(args.check)
        return
    if args.out is None:
        parser.error("--out is required")
    if (args.binary is None) != (args.arch is None):
        parser.error("--binary and --arch go together")
    wheel = build(args.out, args.binary, args.arch)
    check(wheel)
    print(wheel)


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# Make the Python environment the tests use: .venv at the repository root with
# the pinned packages of scripts/requirements-test.txt. Safe to run again.
#
# The Rust tests look for the interpreter at $LEV_TEST_PYTHON, else at
# .venv/bin/python, and fail (never skip) when neither exists.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-python3}"
venv="$root/.venv"

if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    -r "$root/scripts/requirements-test.txt"
"$venv/bin/python" -c 'import cryptography, websockets; print("python env ready:", cryptography.__version__, websockets.__version__)'
echo "$venv/bin/python"

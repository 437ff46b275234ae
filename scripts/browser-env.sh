#!/usr/bin/env bash
# Make sure headless Chromium and its WebDriver are installed: Debian's
# `chromium` and `chromium-driver` packages. Safe to run again; does nothing
# when both are there. The dashboard's browser tests (crates/lev-server/tests)
# run it when they do not find a browser, and FAIL (never skip) when it cannot
# install one.
#
# Overrides the tests honour: LEV_CHROMIUM (the browser binary) and
# LEV_CHROMEDRIVER (the driver binary).
set -euo pipefail

have() {
    command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1
}

if have; then
    echo "browser env ready: $(chromium --version 2>/dev/null || echo chromium), $(chromedriver --version 2>/dev/null | head -n1)"
    exit 0
fi

bash "$(dirname "$0")/apt-install.sh" browser-env chromium chromium-driver

if ! have; then
    echo "browser-env: chromium or chromedriver still not on PATH after installing" >&2
    exit 1
fi
echo "browser env ready: $(chromium --version 2>/dev/null || echo chromium), $(chromedriver --version 2>/dev/null | head -n1)"

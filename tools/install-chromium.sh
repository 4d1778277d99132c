#!/usr/bin/env bash
# Install Chromium (and its chromedriver) from the OS packages when it is
# missing: the browser tests (tests/functional/test_dashboard.py, Horizon
# with blazar-dashboard, and tests/functional/test_capacity_page.py) run
# in headless Chromium. tools/run-tests.sh runs it unless
# NOVA_LEASE_SKIP_DASHBOARD is set (then those tests skip). Safe to re-run
# (it does nothing when chromium is there), needs no standard input.
# Exit 0 when chromium is there afterwards, 1 when it cannot be installed
# (not root, no apt-get, no network): the browser tests then skip and say
# why.
set -uo pipefail
found() {
    command -v chromium >/dev/null 2>&1 || \
        command -v chromium-browser >/dev/null 2>&1
}
if found; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-chromium: no apt-get here: install chromium by hand" >&2
    exit 1
fi
SUDO=
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    else
        echo "install-chromium: not root (and no password-less sudo):" \
             "install chromium by hand" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
echo "install-chromium: installing Chromium and chromedriver (Debian" \
     "packages chromium, chromium-driver) for the dashboard and capacity" \
     "page browser tests; set NOVA_LEASE_SKIP_DASHBOARD=1 to skip them" >&2
# A fresh machine may have no package lists yet: update first.
$SUDO apt-get update -q </dev/null >&2 || true
if ! $SUDO apt-get install -y -q --no-install-recommends \
        -o DPkg::Lock::Timeout=300 \
        chromium chromium-driver </dev/null >&2; then
    echo "install-chromium: apt-get install chromium failed" >&2
    exit 1
fi
found

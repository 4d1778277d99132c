#!/usr/bin/env bash
# The test command: set up .venv if needed, then run every unit and
# functional test (stestr, two workers) and the style checks.
# Extra arguments are passed to "stestr run" (e.g. a test-name regex).
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/setup-env.sh
# Headless Chromium for the browser tests, the dashboard's and the capacity
# page's (OS packages; the tests skip, saying why, when they cannot be
# installed). NOVA_LEASE_SKIP_DASHBOARD=1: neither install nor run them.
case "${NOVA_LEASE_SKIP_DASHBOARD:-}" in
    ""|0)
        ./tools/install-chromium.sh || \
            echo "run-tests: Chromium could not be installed: the browser" \
                 "tests (dashboard, capacity page) will skip" >&2
        ;;
    *)
        echo "run-tests: NOVA_LEASE_SKIP_DASHBOARD is set: Chromium is not" \
             "installed and the browser tests (dashboard, capacity page)" \
             "are skipped" >&2
        ;;
esac
VENV=${NOVA_LEASE_VENV:-.venv}
export OS_NOVA_DISABLE_EVENTLET_PATCHING=1
export PYTHONDONTWRITEBYTECODE=1
# A test that runs longer fails (oslotest's fixture) and, if it cannot
# clean up within a minute more, its process prints every thread's stack
# and ends (tests/functional/base.py): a hang fails the run, never stalls it.
export OS_TEST_TIMEOUT=${OS_TEST_TIMEOUT:-600}
"$VENV/bin/flake8" nova_lease tests benchmarks tools
LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT
set +e
"$VENV/bin/stestr" run --concurrency "${NOVA_LEASE_TEST_CONCURRENCY:-2}" "$@" 2>&1 | tee "$LOG"
rc=${PIPESTATUS[0]}
set -e
passed=$(sed -n 's/^ - Passed: \([0-9]*\)/\1/p' "$LOG" | tail -1)
failed=$(sed -n 's/^ - Failed: \([0-9]*\)/\1/p' "$LOG" | tail -1)
skipped=$(sed -n 's/^ - Skipped: \([0-9]*\)/\1/p' "$LOG" | tail -1)
echo "${passed:-0} passed, ${failed:-0} failed, ${skipped:-0} skipped"
if [ "$rc" -eq 0 ] && [ "${passed:-0}" -eq 0 ]; then
    echo "run-tests: no test ran" >&2
    exit 1
fi
exit "$rc"

#!/usr/bin/env bash
# Create or refresh the dashboard's virtualenv (.venv-dashboard by default,
# or NOVA_LEASE_DASHBOARD_VENV): Horizon and blazar-dashboard, unmodified
# from their releases, versions from tools/dashboard-requirements.txt (and
# constraints.txt for what they share with the product). Used by
# tools/sandbox.sh --dashboard and by the dashboard's browser test.
# Re-running it is cheap: it reinstalls only when a requirements file
# changed. Prints the virtualenv's python on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
DVENV=${NOVA_LEASE_DASHBOARD_VENV:-.venv-dashboard}
PY=${PYTHON:-}
if [ -z "$PY" ]; then
    for cand in python3.11 python3; do
        if command -v "$cand" >/dev/null 2>&1; then PY=$cand; break; fi
    done
fi
REQS=tools/dashboard-requirements.txt
# One installation at a time (two test workers, or a test and the
# sandbox, may ask at once): the others wait, then find it done.
mkdir -p "$(dirname "$DVENV")"
exec 9>"$DVENV.lock"
flock 9
if [ ! -x "$DVENV/bin/python" ]; then
    echo "setup-dashboard: creating $DVENV with $PY" >&2
    "$PY" -m venv "$DVENV"
fi
STAMP="$DVENV/.nova_lease-stamp"
WANT=$(cat "$REQS" constraints.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat "$STAMP" 2>/dev/null || true)" != "$WANT" ]; then
    echo "setup-dashboard: installing Horizon and blazar-dashboard into" \
         "$DVENV (a few minutes the first time)" >&2
    "$DVENV/bin/python" -m pip install -q -U pip >&2
    "$DVENV/bin/python" -m pip install -q -c constraints.txt -r "$REQS" >&2
    echo "$WANT" > "$STAMP"
fi
echo "$(cd "$DVENV" && pwd)/bin/python"

#!/usr/bin/env bash
# Run blazar-tempest-plugin (API and scenario tests, unmodified) against
# the sandbox: sets up .venv (the product) and .venv-tempest (tempest and
# the plugin, versions from tools/blazar-tempest-requirements.txt), starts
# nova-lease-sandbox --devstack-layout (needs 127.0.0.1:80, 5000 and 8774
# free, and the right to listen on port 80), runs the tests, stops it.
# Arguments go to tools/blazar_tempest.py (try --help).
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/setup-env.sh
VENV=${NOVA_LEASE_VENV:-.venv}
TVENV=${NOVA_LEASE_TEMPEST_VENV:-.venv-tempest}
PY=${PYTHON:-python3}
REQS=tools/blazar-tempest-requirements.txt
if [ ! -x "$TVENV/bin/python" ]; then
    echo "blazar-tempest: creating $TVENV" >&2
    "$PY" -m venv "$TVENV"
fi
STAMP="$TVENV/.nova_lease-stamp"
WANT=$(cat "$REQS" constraints.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat "$STAMP" 2>/dev/null || true)" != "$WANT" ]; then
    echo "blazar-tempest: installing tempest and blazar-tempest-plugin" >&2
    "$TVENV/bin/python" -m pip install -q -U pip >&2
    "$TVENV/bin/python" -m pip install -q -c constraints.txt -r "$REQS" >&2
    echo "$WANT" > "$STAMP"
fi
export OS_NOVA_DISABLE_EVENTLET_PATCHING=1
exec "$VENV/bin/python" tools/blazar_tempest.py "$(pwd)/$TVENV" "$@"

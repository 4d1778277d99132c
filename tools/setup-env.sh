#!/usr/bin/env bash
# Create or refresh the project's virtualenv (.venv by default) with the
# tested versions from constraints.txt. Re-running it is cheap: it reinstalls
# only when a requirements file changed.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${NOVA_LEASE_VENV:-.venv}
PY=${PYTHON:-}
if [ -z "$PY" ]; then
    for cand in python3.11 python3; do
        if command -v "$cand" >/dev/null 2>&1; then PY=$cand; break; fi
    done
fi
"$PY" - <<'PYEOF'
import sys
if sys.version_info < (3, 11):
    sys.exit('nova_lease needs Python >= 3.11, found %s' % sys.version.split()[0])
PYEOF
if [ ! -x "$VENV/bin/python" ]; then
    echo "setup-env: creating $VENV with $PY" >&2
    "$PY" -m venv "$VENV"
fi
STAMP="$VENV/.nova_lease-stamp"
WANT=$(cat requirements.txt test-requirements.txt constraints.txt pyproject.toml setup.cfg | sha256sum | cut -d' ' -f1)
if [ "$(cat "$STAMP" 2>/dev/null || true)" != "$WANT" ]; then
    echo "setup-env: installing requirements into $VENV (about a minute)" >&2
    "$VENV/bin/python" -m pip install -q -U pip >&2
    "$VENV/bin/python" -m pip install -q -c constraints.txt \
        -r requirements.txt -r test-requirements.txt >&2
    "$VENV/bin/python" -m pip install -q -c constraints.txt --no-deps -e . >&2
    echo "$WANT" > "$STAMP"
fi

#!/usr/bin/env bash
# Build the documentation (doc/build/html) and the release notes
# (releasenotes/build/html) with the project's virtualenv, as "tox -e docs"
# and "tox -e releasenotes" do, for a machine without tox. Warnings are
# errors.
#
#   ./tools/build-docs.sh                  # both
#   ./tools/build-docs.sh --docs           # the documentation only
#   ./tools/build-docs.sh --releasenotes   # the release notes only
#
# It creates or refreshes .venv with tools/setup-env.sh, then installs
# doc/requirements.txt into it (with constraints.txt) when that file or the
# constraints changed since the last build.
set -euo pipefail
cd "$(dirname "$0")/.."
docs=1
notes=1
case "${1:-}" in
    "") ;;
    --docs) notes=0 ;;
    --releasenotes) docs=0 ;;
    *) echo "usage: $0 [--docs|--releasenotes]" >&2; exit 2 ;;
esac
./tools/setup-env.sh
VENV=${NOVA_LEASE_VENV:-.venv}
STAMP="$VENV/.nova_lease-docs-stamp"
WANT=$(cat doc/requirements.txt constraints.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat "$STAMP" 2>/dev/null || true)" != "$WANT" ]; then
    echo "build-docs: installing doc/requirements.txt into $VENV" >&2
    "$VENV/bin/python" -m pip install -q -c constraints.txt \
        -r doc/requirements.txt >&2
    echo "$WANT" > "$STAMP"
fi
if [ "$docs" = 1 ]; then
    rm -rf doc/build
    "$VENV/bin/sphinx-build" -W --keep-going -b html \
        -d doc/build/doctrees doc/source doc/build/html
    echo "build-docs: doc/build/html/index.html"
fi
if [ "$notes" = 1 ]; then
    rm -rf releasenotes/build
    "$VENV/bin/sphinx-build" -a -E -W --keep-going -b html \
        -d releasenotes/build/doctrees releasenotes/source \
        releasenotes/build/html
    echo "build-docs: releasenotes/build/html/index.html"
fi

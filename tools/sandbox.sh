#!/usr/bin/env bash
# The main job: set up .venv if needed, then start the sandbox (a real
# Keystone, an all-in-one Nova 34 with nova_lease and nova-lease-engine as
# a process of its own, on SQLite, on 127.0.0.1). Arguments go to
# nova-lease-sandbox (try --demo).
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/setup-env.sh
VENV=${NOVA_LEASE_VENV:-.venv}
export OS_NOVA_DISABLE_EVENTLET_PATCHING=1
exec "$VENV/bin/nova-lease-sandbox" "$@"

#!/usr/bin/env bash
# The main job: set up .venv if needed, then start the sandbox (a real
# Keystone, an all-in-one Nova 34 with nova_lease and nova-lease-engine as
# a process of its own, on SQLite, on 127.0.0.1). Arguments go to
# nova-lease-sandbox (try --demo). With --dashboard, also set up
# .venv-dashboard (Horizon and blazar-dashboard, tools/setup-dashboard.sh)
# and serve them on 127.0.0.1:8080 (--dashboard-port). With --split, Nova
# runs as separate processes as the install guide deploys it (needs MariaDB
# on 127.0.0.1:3306 and RabbitMQ on 127.0.0.1:5672; see
# doc/source/install/sandbox.rst).
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/setup-env.sh
VENV=${NOVA_LEASE_VENV:-.venv}
export OS_NOVA_DISABLE_EVENTLET_PATCHING=1
for arg in "$@"; do
    if [ "$arg" = "--dashboard" ]; then
        NOVA_LEASE_DASHBOARD_PYTHON=$(./tools/setup-dashboard.sh)
        export NOVA_LEASE_DASHBOARD_PYTHON
        break
    fi
done
exec "$VENV/bin/nova-lease-sandbox" "$@"

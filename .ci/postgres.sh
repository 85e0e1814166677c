#!/usr/bin/env bash
# Installs the PostgreSQL server binaries the PostgreSQL tests start a
# throwaway cluster with (tests/pg_server.rs). Idempotent.
set -euo pipefail
if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    echo "PostgreSQL $(ls /usr/lib/postgresql | sort -n | tail -n 1) present"
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q postgresql
echo "PostgreSQL $(ls /usr/lib/postgresql | sort -n | tail -n 1) installed"

#!/usr/bin/env bash
# Start the local services the tests talk to, when they are installed and down.
set -euo pipefail

if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
  if ! pg_isready -h 127.0.0.1 -p 5432 >/dev/null 2>&1; then
    version=$(ls /etc/postgresql | head -n 1)
    pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
    for _ in $(seq 1 30); do
      pg_isready -h 127.0.0.1 -p 5432 >/dev/null 2>&1 && break
      sleep 1
    done
  fi
  pg_isready -h 127.0.0.1 -p 5432 || echo "warning: PostgreSQL is not reachable on 127.0.0.1:5432"
fi

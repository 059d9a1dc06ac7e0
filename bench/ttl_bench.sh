#!/usr/bin/env bash
# Expiry benchmark: mayfly's TTL monitor vs Redis key expiry (see the comment
# at the top of bench/ttl_bench.js). Builds the release binary (make all)
# unless $MAYFLYD is set, then runs the script; extra arguments go to it
# (--docs N, --sample N, --poll MS, --spread SECS). Needs redis-server on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${MAYFLYD:-}" ]; then
    make all >/dev/null
    MAYFLYD="$PWD/build/mayflyd"
fi
command -v "${REDIS_SERVER:-redis-server}" >/dev/null || { echo "ttl_bench: redis-server not found" >&2; exit 2; }
[ -d node_modules/mongodb ] || npm ci --no-audit --no-fund --loglevel=error
MAYFLYD="$MAYFLYD" exec node bench/ttl_bench.js "$@"

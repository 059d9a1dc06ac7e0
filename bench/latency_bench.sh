#!/usr/bin/env bash
# Latency, scaling and ingest benchmark, mayfly vs Redis (issue 13; see the
# comment at the top of bench/latency_bench.js). Builds the release binary
# (make -j2 all -> build/mayflyd) unless $MAYFLYD is set, installs
# redis-server with apt-get if it is missing (through sudo unless root), runs
# `npm ci` only if node_modules/mongodb is missing, then runs the script;
# extra arguments go to it (--rounds R, --reqs N, --secs S, --docs D,
# --only latency|scaling|ingest).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${MAYFLYD:-}" ]; then
    make -j2 all >/dev/null
    MAYFLYD="$PWD/build/mayflyd"
fi
if ! command -v "${REDIS_SERVER:-redis-server}" >/dev/null; then
    if [ -n "${REDIS_SERVER:-}" ]; then
        echo "latency_bench: $REDIS_SERVER not found" >&2; exit 2
    fi
    echo "latency_bench: installing redis-server" >&2
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || { echo "latency_bench: redis-server missing and not root (no sudo)" >&2; exit 2; }
        SUDO="sudo"
    fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server >/dev/null
    # The package starts a system-wide redis on 6379; the bench starts its own.
    command -v redis-server >/dev/null || { echo "latency_bench: redis-server install failed" >&2; exit 2; }
fi
[ -d node_modules/mongodb ] || npm ci --no-audit --no-fund --loglevel=error
MAYFLYD="$MAYFLYD" exec node bench/latency_bench.js "$@"

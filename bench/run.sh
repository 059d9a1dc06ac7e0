#!/usr/bin/env bash
# Runs the driver benchmark against the optimised build (build/mayflyd, or
# the binary given as $1). Extra arguments go to bench.js (--docs N etc).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-build/mayflyd}"
[ "$#" -gt 0 ] && shift
case "$bin" in /*) ;; *) bin="$PWD/$bin" ;; esac
if [ ! -x "$bin" ]; then
    echo "bench: mayflyd binary not found: $bin (run make first)" >&2
    exit 2
fi
[ -d node_modules/mongodb ] || npm ci --no-audit --no-fund --loglevel=error
MAYFLYD="$bin" exec node bench/bench.js "$@"

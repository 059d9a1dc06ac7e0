#!/usr/bin/env bash
# Time-series benchmark (see the comment at the top of bench/ts_bench.js):
# builds the release binary (make all) unless $MAYFLYD is set, then runs the
# script; extra arguments go to it (--docs N, --sensors S, --batch B).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${MAYFLYD:-}" ]; then
    make all >/dev/null
    MAYFLYD="$PWD/build/mayflyd"
fi
[ -d node_modules/mongodb ] || npm ci --no-audit --no-fund --loglevel=error
MAYFLYD="$MAYFLYD" exec node bench/ts_bench.js "$@"

#!/usr/bin/env bash
# Streaming aggregation benchmark (see the comment at the top of
# bench/agg_bench.js). Builds the release binary (make all) unless $MAYFLYD
# is set, then runs the script on a temporary dbpath; extra arguments go to
# it (--docs N, --reps R).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${MAYFLYD:-}" ]; then
    make -j2 all >/dev/null
    MAYFLYD="$PWD/build/mayflyd"
fi
[ -d node_modules/mongodb ] || npm ci --no-audit --no-fund --loglevel=error
MAYFLYD="$MAYFLYD" exec node bench/agg_bench.js "$@"

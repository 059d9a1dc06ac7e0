#!/usr/bin/env bash
# Costs benchmark (issue 7; see the comment at the top of bench/costs_bench.js).
# Builds the release binary (make all) unless $MAYFLYD is set, then runs the
# script; extra arguments go to it (--scale F, --reps R).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${MAYFLYD:-}" ]; then
    make -j2 all >/dev/null
    MAYFLYD="$PWD/build/mayflyd"
fi
[ -d node_modules/mongodb ] || npm ci --no-audit --no-fund --loglevel=error
MAYFLYD="$MAYFLYD" exec node bench/costs_bench.js "$@"

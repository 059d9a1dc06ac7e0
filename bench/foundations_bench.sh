#!/usr/bin/env bash
# Engine-foundations benchmark (see the comment at the top of bench/foundations_bench.js).
# Builds the release binary (make all) unless $MAYFLYD is set, then runs the
# script; extra arguments go to it (--docs N, --ops K).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${MAYFLYD:-}" ]; then
    make all >/dev/null
    MAYFLYD="$PWD/build/mayflyd"
fi
[ -d node_modules/mongodb ] || npm ci --no-audit --no-fund --loglevel=error
MAYFLYD="$MAYFLYD" exec node bench/foundations_bench.js "$@"

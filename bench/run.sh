#!/usr/bin/env bash
# Runs the driver benchmark against the optimised build (build/mayflyd, or
# the binary given as $1). Extra arguments go to bench.js (--docs N etc).
set -euo pipefail
. "$(dirname "$0")/lib/common.sh"
bin="${1:-build/mayflyd}"
[ "$#" -gt 0 ] && shift
case "$bin" in /*) ;; *) bin="$PWD/$bin" ;; esac
if [ ! -x "$bin" ]; then
    echo "bench: mayflyd binary not found: $bin (run make first)" >&2
    exit 2
fi
bench_node_modules
export MAYFLYD="$bin"
bench_exec bench.js "$@"

#!/usr/bin/env bash
# Time-series benchmark (see the comment at the top of bench/ts_bench.js):
# builds the release binary (make -j2 all) unless $MAYFLYD is set, then runs the
# script; extra arguments go to it (--docs N, --sensors S, --batch B).
set -euo pipefail
. "$(dirname "$0")/lib/common.sh"
bench_run ts_bench.js "$@"

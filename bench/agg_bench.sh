#!/usr/bin/env bash
# Streaming aggregation benchmark (see the comment at the top of
# bench/agg_bench.js). Builds the release binary (make -j2 all) unless $MAYFLYD
# is set, then runs the script on a temporary dbpath; extra arguments go to
# it (--docs N, --reps R).
set -euo pipefail
. "$(dirname "$0")/lib/common.sh"
bench_run agg_bench.js "$@"

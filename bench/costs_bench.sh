#!/usr/bin/env bash
# Costs benchmark (issue 7; see the comment at the top of bench/costs_bench.js).
# Builds the release binary (make -j2 all) unless $MAYFLYD is set, then runs the
# script; extra arguments go to it (--scale F, --reps R).
set -euo pipefail
. "$(dirname "$0")/lib/common.sh"
bench_run costs_bench.js "$@"

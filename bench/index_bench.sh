#!/usr/bin/env bash
# Secondary-index benchmark (see the comment at the top of bench/index_bench.js).
# Builds the release binary (make -j2 all) unless $MAYFLYD is set, then runs the
# script; extra arguments go to it (--scale F, --secs S).
set -euo pipefail
. "$(dirname "$0")/lib/common.sh"
bench_run index_bench.js "$@"

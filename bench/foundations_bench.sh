#!/usr/bin/env bash
# Engine-foundations benchmark (see the comment at the top of bench/foundations_bench.js).
# Builds the release binary (make -j2 all) unless $MAYFLYD is set, then runs the
# script; extra arguments go to it (--docs N, --ops K).
set -euo pipefail
. "$(dirname "$0")/lib/common.sh"
bench_run foundations_bench.js "$@"

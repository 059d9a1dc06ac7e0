#!/usr/bin/env bash
# Mass expiry from fresh vs restarted pages (see the comment at the top of
# bench/ttl_pages_bench.js): builds the release binary (make -j2 all) unless
# $MAYFLYD is set, then runs the script; extra arguments go to it
# (--docs N, --rounds R, --fg 0|1).
set -euo pipefail
. "$(dirname "$0")/lib/common.sh"
bench_run ttl_pages_bench.js "$@"

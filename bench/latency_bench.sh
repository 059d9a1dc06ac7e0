#!/usr/bin/env bash
# Latency, scaling and ingest benchmark, mayfly vs Redis (issue 13; see the
# comment at the top of bench/latency_bench.js). Builds the release binary
# (make -j2 all -> build/mayflyd) unless $MAYFLYD is set, installs
# redis-server with apt-get if it is missing (through sudo unless root), runs
# `npm ci` only if node_modules/mongodb is missing, then runs the script;
# extra arguments go to it (--rounds R, --reqs N, --secs S, --docs D, --ingest-rounds K,
# --only latency|scaling|ingest).
set -euo pipefail
. "$(dirname "$0")/lib/common.sh"
bench_mayflyd
bench_need_redis latency_bench
bench_node_modules
bench_exec latency_bench.js "$@"

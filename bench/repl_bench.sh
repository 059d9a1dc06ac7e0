#!/usr/bin/env bash
# Replica-set benchmark (see the comment at the top of bench/repl_bench.js):
# insertOne throughput w:1 / w:"majority" on a 3-member loopback set vs a
# standalone, failover time over N kill -9 of the primary, replication lag
# during a mass expiry. Builds the release binary (make -j2 all) unless $MAYFLYD
# is set, then runs the script; extra arguments go to it (--seconds S,
# --kills N, --expire-docs M, --phases abc, --quick).
set -euo pipefail
. "$(dirname "$0")/lib/common.sh"
bench_run repl_bench.js "$@"

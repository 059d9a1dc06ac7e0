#!/usr/bin/env bash
# Who held the CPU while a paced client waited during a mass expiry (see the
# comment at the top of bench/sched_blame.js): builds the release binary
# (make -j2 all) unless $MAYFLYD is set, installs perf when it is missing,
# then runs the script; extra arguments go to it (--docs N, --rate OPS,
# --runs R, --wait-ms W).
set -euo pipefail
. "$(dirname "$0")/lib/common.sh"
command -v perf >/dev/null || bench_apt_install sched_blame linux-perf
bench_run sched_blame.js "$@"

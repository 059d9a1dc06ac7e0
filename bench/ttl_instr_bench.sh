#!/usr/bin/env bash
# Instructions per expired document, burst vs spread, under callgrind (see the
# comment at the top of bench/ttl_instr_bench.js): builds the release binary
# (make -j2 all) unless $MAYFLYD is set, installs valgrind when it is missing,
# then runs the script; extra arguments go to it (--docs N, --rates R1,R2,
# --secs S).
set -euo pipefail
. "$(dirname "$0")/lib/common.sh"
command -v valgrind >/dev/null || bench_apt_install ttl_instr_bench valgrind
bench_run ttl_instr_bench.js "$@"

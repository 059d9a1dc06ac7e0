#!/usr/bin/env bash
# Instructions per request (ping, find by _id, insert) under callgrind (see
# the comment at the top of bench/request_instr_bench.js): builds the release
# binary (make -j2 all) unless $MAYFLYD is set, installs valgrind when it is
# missing, then runs the script; extra arguments go to it (--reqs N).
set -euo pipefail
. "$(dirname "$0")/lib/common.sh"
command -v valgrind >/dev/null || bench_apt_install request_instr_bench valgrind
bench_run request_instr_bench.js "$@"

#!/usr/bin/env bash
# Load (issue 10): C concurrent connections (default 1000) doing mixed reads
# and writes for D seconds (default 600) against a release mayflyd it starts
# itself (see the comment at the top of bench/load.js). Builds the release
# binary (make -j2 all) unless $MAYFLYD is set, raises the open-files limit
# (ulimit -n) to what the connections need (the server inherits it), then
# runs the script; arguments go to it (--conns C, --duration SECS,
# --phases P, --docs N).
set -euo pipefail
. "$(dirname "$0")/lib/common.sh"
bench_mayflyd
bench_node_modules
conns="${CONNS:-1000}"
prev=""
for a in "$@"; do
    [ "$prev" = "--conns" ] && conns="$a"
    prev="$a"
done
want=$(( conns * 2 + 1024 ))
[ "$want" -lt 65536 ] && want=65536
soft=$(ulimit -Sn)
if [ "$soft" != unlimited ] && [ "$soft" -lt "$want" ]; then
    hard=$(ulimit -Hn)
    if [ "$hard" = unlimited ] || [ "$hard" -ge "$want" ]; then
        ulimit -Sn "$want"
    else
        ulimit -Sn "$hard"
    fi
fi
bench_exec load.js "$@"

#!/usr/bin/env bash
# Runs criterion unit suites, UNIT_JOBS at a time (default: the CPUs, at most
# 4; 1 runs them one after another as before):
#   scripts/unit-run.sh build-asan/tests/test_a build-asan/tests/test_b ...
# Each suite runs its tests one at a time (--jobs 1) with LeakSanitizer on;
# its output is printed whole, after "== <suite>", once it ends, so suites
# running side by side never interleave. Exits non-zero if any suite failed
# (its name is repeated at the end). The suites use their own temporary
# directories and free ports, so any two can run at once.
set -uo pipefail
cd "$(dirname "$0")/.."

jobs="${UNIT_JOBS:-$(nproc 2>/dev/null || echo 1)}"
[ "$jobs" -gt 4 ] && jobs=4
[ "$jobs" -ge 1 ] || jobs=1
out="$(mktemp -d /tmp/mf-unit-XXXXXX)"
trap 'rm -rf "$out"' EXIT

failed=()
declare -A pid_of=()
finish() { # waits for suite $1, prints its output, records a failure
    local t="$1" rc=0
    wait "${pid_of[$t]}" || rc=$?
    echo "== $t"
    cat "$out/$(basename "$t")"
    [ "$rc" -eq 0 ] || { failed+=("$t"); echo "== $t: exit $rc"; }
    unset "pid_of[$t]"
}
running=()
for t in "$@"; do
    if [ "${#running[@]}" -ge "$jobs" ]; then
        finish "${running[0]}"
        running=("${running[@]:1}")
    fi
    ASAN_OPTIONS=detect_leaks=1 "$t" --jobs 1 >"$out/$(basename "$t")" 2>&1 &
    pid_of[$t]=$!
    running+=("$t")
done
for t in "${running[@]}"; do finish "$t"; done
if [ "${#failed[@]}" -gt 0 ]; then
    echo "unit-run: FAILED: ${failed[*]}" >&2
    exit 1
fi
echo "unit-run: ok (${#@} suites)"

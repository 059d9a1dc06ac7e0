#!/usr/bin/env bash
# Runs criterion unit suites, UNIT_JOBS at a time (default: the CPUs, at most
# 4; 1 runs them one after another):
#   scripts/unit-run.sh build-asan/tests/test_a build-asan/tests/test_b ...
# Each suite runs its tests one at a time (--jobs 1) with LeakSanitizer on;
# its output is printed whole, after "== <suite>", once it ends, so suites
# running side by side never interleave. Exits non-zero if any suite failed
# (named again at the end). The suites use their own temporary directories
# and free ports, so any two can run at once.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/pool.sh

out="$(mktemp -d /tmp/mf-unit-XXXXXX)"
trap 'rm -rf "$out"' EXIT
export out

# run_suite SUITE: runs it, keeps its exit status in $out/<name>.rc, prints its output.
run_suite() {
    local t="$1" name rc
    name="$(basename "$t")"
    ASAN_OPTIONS=detect_leaks=1 "$t" --jobs 1 > "$out/$name.log" 2>&1
    rc=$?
    echo "$rc" > "$out/$name.rc"
    { echo "== $t"; cat "$out/$name.log"; [ "$rc" -eq 0 ] || echo "== $t: exit $rc"; } | pool_print "$out/.lock"
}
export -f run_suite

pool_run "$(pool_jobs "${UNIT_JOBS:-}")" run_suite "$@"
failed=()
for t in "$@"; do
    [ "$(cat "$out/$(basename "$t").rc" 2>/dev/null)" = 0 ] || failed+=("$t")
done
if [ "${#failed[@]}" -gt 0 ]; then
    echo "unit-run: FAILED: ${failed[*]}" >&2
    exit 1
fi
echo "unit-run: ok ($# suites)"

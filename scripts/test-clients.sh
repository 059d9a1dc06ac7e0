#!/usr/bin/env bash
# Runs the client-level test suites against a mayflyd binary:
#   scripts/test-clients.sh [path/to/mayflyd]     (default build-asan/mayflyd)
# Node driver, mongoose and mongosh suites run under `node --test`, one node
# process per file (each file starts its own servers); then the pymongo suite.
# Extra arguments after the binary are test files to run instead of all of
# them (those run one at a time). Exits non-zero if either part fails.
#
# The whole suite spends much of its time waiting (for expiries, elections,
# restarts: measured, a file and its servers keep about half of one CPU busy
# over the file's run), so its files run MAYFLY_TEST_JOBS at a time
# (default: one more than the CPUs, at most 4; 1 runs them one after the
# other as before). Files whose tests
# measure the server against the machine's load (SERIAL below: programs kept
# busy beside it, a query kept slow while DDL runs, thread counts, lateness
# on an idle machine, elections' timeouts, a file that needs most of its
# time limit) run afterwards, alone. A file that fails beside another
# is run again alone, and only its result alone counts: the line
# "run again alone" names every such file, so a test that needs to be alone
# is seen and added to SERIAL.
set -uo pipefail
cd "$(dirname "$0")/.."

bin="${1:-build-asan/mayflyd}"
shift || true
case "$bin" in /*) ;; *) bin="$PWD/$bin" ;; esac
if [ ! -x "$bin" ]; then
    echo "test-clients: mayflyd binary not found or not executable: $bin" >&2
    exit 2
fi
export MAYFLYD="$bin"
if [ ! -d node_modules/mongodb ] || [ ! -d node_modules/puppeteer-core ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    npm ci --no-audit --no-fund --loglevel=error || exit 2
fi

if [ "$#" -gt 0 ]; then
    echo "== node driver / mongoose / mongosh suites ($# files) against $bin"
    node --test --test-concurrency=1 --test-timeout=240000 "$@"
    exit $?
fi

# A file still running after FILE_LIMIT seconds is killed with its servers
# (timeout signals its whole process group) and counts as failed, so a hung
# file (a hook awaiting a promise that never settles has no node:test
# timeout) fails the run instead of stalling it until CI's own limit.
FILE_LIMIT="${MAYFLY_FILE_LIMIT:-900}"
SERIAL="ttl_schedgroup locks stalls hold_stress ttl_monitor limits replset_failover"
# The longest of the others start first, so that no long file runs on alone at the end.
FIRST="tls compact index_build agg_stages replset_ttl changestream archive"
. scripts/pool.sh
njobs="$(pool_jobs "${MAYFLY_TEST_JOBS:-$(( $(nproc 2>/dev/null || echo 1) + 1 ))}")"

logs="$(mktemp -d /tmp/mf-client-logs.XXXXXX)"
trap 'rm -rf "$logs"' EXIT
together=()
alone=()
ordered=()
for base in $FIRST; do
    [ -f "tests/clients/$base.test.js" ] && ordered+=("tests/clients/$base.test.js")
done
for f in tests/clients/*.test.js; do
    [[ " $FIRST " == *" $(basename "$f" .test.js) "* ]] || ordered+=("$f")
done
for f in "${ordered[@]}"; do
    base="$(basename "$f" .test.js)"
    if [ "$njobs" -gt 1 ] && [[ " $SERIAL " != *" $base "* ]]; then
        together+=("$f")
    else
        alone+=("$f")
    fi
done

# run_file FILE: runs one file, keeps its output in $logs/<name>.log and its
# exit status in $logs/<name>.rc, then prints the output whole (under a lock,
# so two files' outputs never interleave).
run_file() {
    local f="$1" name rc
    name="$(basename "$f" .test.js)"
    t0=$(date +%s)
    timeout -k 15 "$FILE_LIMIT" node --test --test-concurrency=1 --test-timeout=240000 "$f" > "$logs/$name.log" 2>&1
    rc=$?
    [ "$rc" -eq 124 ] && echo "== $f: killed after $FILE_LIMIT s (MAYFLY_FILE_LIMIT), its servers with it" >> "$logs/$name.log"
    echo "$rc" > "$logs/$name.rc"
    { echo "== $f (exit $(cat "$logs/$name.rc"), $(( $(date +%s) - t0 )) s)"; cat "$logs/$name.log"; } |
        pool_print "$logs/.print.lock"
}
export -f run_file
export logs FILE_LIMIT

start=$(date +%s)
echo "== node driver / mongoose / mongosh suites ($(( ${#together[@]} + ${#alone[@]} )) files, ${#together[@]} of them $njobs at a time) against $bin"
pool_run "$njobs" run_file "${together[@]}"
again=()
for f in "${together[@]}"; do
    [ "$(cat "$logs/$(basename "$f" .test.js).rc" 2>/dev/null)" = 0 ] || again+=("$f")
done
if [ "${#again[@]}" -gt 0 ]; then
    echo "== run again alone (failed beside another file): ${again[*]}"
fi
for f in "${alone[@]}" "${again[@]}"; do
    run_file "$f"
done

# The totals, from every file's last run.
tests=0 pass=0 fail=0 node_rc=0 failed=()
for f in tests/clients/*.test.js; do
    name="$(basename "$f" .test.js)"
    [ "$(cat "$logs/$name.rc" 2>/dev/null)" = 0 ] || { node_rc=1; failed+=("$f"); }
    t=$(sed -n 's/^# tests \([0-9]*\)$/\1/p' "$logs/$name.log" | tail -1)
    p=$(sed -n 's/^# pass \([0-9]*\)$/\1/p' "$logs/$name.log" | tail -1)
    x=$(sed -n 's/^# fail \([0-9]*\)$/\1/p' "$logs/$name.log" | tail -1)
    tests=$(( tests + ${t:-0} )) pass=$(( pass + ${p:-0} )) fail=$(( fail + ${x:-0} ))
done
echo "== node totals over every file's last run ($(( $(date +%s) - start )) s):"
echo "# tests $tests"
echo "# pass $pass"
echo "# fail $fail"
[ "${#failed[@]}" -gt 0 ] && echo "== node files that failed: ${failed[*]}"

py_rc=0
for py in tests/clients/test_pymongo*.py; do
    echo "== pymongo suite: $py"
    /usr/bin/python3 "$py" || py_rc=1
done

echo "== client suites: node exit $node_rc, pymongo exit $py_rc"
[ "$node_rc" -eq 0 ] && [ "$py_rc" -eq 0 ]

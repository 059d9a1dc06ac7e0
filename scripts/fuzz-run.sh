#!/usr/bin/env bash
# Runs libFuzzer targets for a while each, several at a time:
#   scripts/fuzz-run.sh SECONDS [name...]     (default: every target; `make fuzz` builds them)
# Names are those of fuzz/fuzz_<name>.c: wire bson match update agg keystring scram.
#
# Each target starts from its seed corpus fuzz/corpus/<name>/ (read, never
# written) and build-fuzz/corpus/<name>/ (what earlier runs found; kept, not
# committed), with fuzz/<name>.dict. A crash, leak, timeout (an input taking
# more than 10 s), out-of-memory (over 2 GiB) or broken invariant stops that
# target, saves the input as fuzz/crashes/<name>-<kind>-<sha1> and fails the
# run; the full log is build-fuzz/fuzz-<name>.log. Prints one summary line
# per target (executions, coverage) and exits non-zero if any target failed.
# Targets run FUZZ_JOBS at a time (default: the CPUs, at most 4), each
# printing its lines once it ends; a fixed time each, so on two cores the
# whole run takes half as long as one after another.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/pool.sh

secs="${1:-30}"
shift || true
names=("$@")
[ "${#names[@]}" -gt 0 ] || names=(wire bson match update agg keystring scram)
export secs

mkdir -p fuzz/crashes build-fuzz/corpus
for n in "${names[@]}"; do
    if [ ! -x "build-fuzz/fuzz/fuzz_$n" ]; then
        echo "fuzz-run: build-fuzz/fuzz/fuzz_$n is missing (make fuzz)" >&2
        exit 2
    fi
    if [ ! -d "fuzz/corpus/$n" ]; then
        echo "fuzz-run: no seed corpus fuzz/corpus/$n" >&2
        exit 2
    fi
done

# run_one NAME: runs one target, keeps its exit status in
# build-fuzz/fuzz-<name>.rc and prints its summary (on failure with the end
# of its log).
run_one() {
    local n="$1" bin="build-fuzz/fuzz/fuzz_$1" work="build-fuzz/corpus/$1" log="build-fuzz/fuzz-$1.log"
    local out="build-fuzz/fuzz-$1.out" dict=() rc execs last cov ft corp
    mkdir -p "$work"
    [ -f "fuzz/$n.dict" ] && dict=("-dict=fuzz/$n.dict")
    ASAN_OPTIONS="detect_leaks=1:fast_unwind_on_malloc=0:allocator_may_return_null=0:handle_abort=1" \
    UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
        "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
        -print_final_stats=1 -artifact_prefix="fuzz/crashes/$n-" "${dict[@]}" \
        "$work" "fuzz/corpus/$n" >"$log" 2>&1
    rc=$?
    execs=$(grep -aE '^stat::number_of_executed_units' "$log" | awk '{print $2}')
    last=$(grep -aE '^#[0-9]+' "$log" | tail -1)
    cov=$(echo "$last" | grep -oE 'cov: [0-9]+' | awk '{print $2}')
    ft=$(echo "$last" | grep -oE 'ft: [0-9]+' | awk '{print $2}')
    corp=$(echo "$last" | grep -oE 'corp: [0-9]+' | awk '{print $2}')
    {
        echo "== fuzz $n: ${secs}s"
        echo "fuzz $n: exit $rc, ${execs:-?} executions, cov ${cov:-?} edges, ft ${ft:-?} features," \
             "corpus ${corp:-?} inputs"
        if [ "$rc" -ne 0 ]; then
            echo "---- fuzz $n failed; the end of $log:"
            tail -n 60 "$log"
            grep -aE 'Test unit written to' "$log"
        fi
    } >"$out"
    echo "$rc" > "build-fuzz/fuzz-$n.rc"
    pool_print build-fuzz/.fuzz-print.lock < "$out"
}
export -f run_one

rm -f build-fuzz/fuzz-*.rc
pool_run "$(pool_jobs "${FUZZ_JOBS:-}")" run_one "${names[@]}"
failed=()
for n in "${names[@]}"; do
    [ "$(cat "build-fuzz/fuzz-$n.rc" 2>/dev/null)" = 0 ] || failed+=("$n")
done
if [ "${#failed[@]}" -gt 0 ]; then
    echo "fuzz-run: FAILED: ${failed[*]} (inputs under fuzz/crashes/)" >&2
    exit 1
fi
echo "fuzz-run: ok (${names[*]})"

#!/usr/bin/env bash
# Runs libFuzzer targets for a while each, one after another:
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
# Two instances may run at once on different targets.
set -uo pipefail
cd "$(dirname "$0")/.."

secs="${1:-30}"
shift || true
names=("$@")
[ "${#names[@]}" -gt 0 ] || names=(wire bson match update agg keystring scram)

mkdir -p fuzz/crashes build-fuzz/corpus
failed=()
for n in "${names[@]}"; do
    bin="build-fuzz/fuzz/fuzz_$n"
    if [ ! -x "$bin" ]; then
        echo "fuzz-run: $bin is missing (make fuzz)" >&2
        exit 2
    fi
    if [ ! -d "fuzz/corpus/$n" ]; then
        echo "fuzz-run: no seed corpus fuzz/corpus/$n" >&2
        exit 2
    fi
    work="build-fuzz/corpus/$n"
    log="build-fuzz/fuzz-$n.log"
    mkdir -p "$work"
    dict=()
    [ -f "fuzz/$n.dict" ] && dict=("-dict=fuzz/$n.dict")
    echo "== fuzz $n: ${secs}s"
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
    echo "fuzz $n: exit $rc, ${execs:-?} executions, cov ${cov:-?} edges, ft ${ft:-?} features," \
         "corpus ${corp:-?} inputs"
    if [ "$rc" -ne 0 ]; then
        failed+=("$n")
        echo "---- fuzz $n failed; the end of $log:" >&2
        tail -n 60 "$log" >&2
        grep -aE 'Test unit written to' "$log" >&2
    fi
done
if [ "${#failed[@]}" -gt 0 ]; then
    echo "fuzz-run: FAILED: ${failed[*]} (inputs under fuzz/crashes/)" >&2
    exit 1
fi
echo "fuzz-run: ok (${names[*]})"

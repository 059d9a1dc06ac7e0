# scripts/pool.sh: sourced by the test runners (unit-run.sh, fuzz-run.sh,
# test-clients.sh) to run independent jobs several at a time.
#
# pool_jobs [N]: N (default: the CPUs) as a job count from 1 to 4.
# pool_run JOBS FN ITEM...: runs `FN ITEM` for every item, JOBS at a time
#   (FN must be exported with `export -f`, with any variables it reads); the
#   caller reads each job's result from the files FN leaves, since xargs
#   only says whether some job failed.
# pool_print LOCK: copies its standard input to standard output holding the
#   lock file LOCK, so jobs that end together never interleave their output.

pool_jobs() {
    local n="${1:-$(nproc 2>/dev/null || echo 1)}"
    case "$n" in '' | *[!0-9]*) n=1 ;; esac
    [ "$n" -lt 1 ] && n=1
    [ "$n" -gt 4 ] && n=4
    echo "$n"
}

pool_run() {
    local jobs="$1" fn="$2"
    shift 2
    [ "$#" -gt 0 ] || return 0
    printf '%s\0' "$@" | xargs -0 -n 1 -P "$jobs" bash -c "$fn \"\$1\"" _ || true
}

pool_print() {
    (
        flock 9
        cat
    ) 9> "$1"
}
export -f pool_print

# shellcheck shell=bash
# What the bench/*.sh wrappers share, sourced by each of them:
#   . "$(dirname "$0")/lib/common.sh"
#
# Sourcing moves to the repository root. Then a wrapper calls, as it needs:
#   bench_mayflyd         builds the release binary (make -j2 all -> build/mayflyd)
#                         unless $MAYFLYD is set, and sets MAYFLYD to it;
#   bench_node_modules    runs `npm ci` when node_modules/mongodb (or the
#                         package given, e.g. pg) is missing;
#   bench_need_redis P    installs redis-server with apt-get when it is not on
#                         PATH (P names the bench in messages; exit 2 on failure);
#   bench_apt_install P PKG...  apt-get install through sudo unless root;
#   bench_exec SCRIPT ARGS...   runs node bench/SCRIPT with MAYFLYD exported;
#   bench_run SCRIPT ARGS...    the common case: bench_mayflyd,
#                         bench_node_modules, bench_exec.

cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 2

bench_mayflyd() {
    if [ -z "${MAYFLYD:-}" ]; then
        make -j2 all >/dev/null
        MAYFLYD="$PWD/build/mayflyd"
    fi
}

# shellcheck disable=SC2120  # ttl_bench.sh passes pg
bench_node_modules() {
    local pkg
    for pkg in mongodb "$@"; do
        if [ ! -d "node_modules/$pkg" ]; then
            npm ci --no-audit --no-fund --loglevel=error
            return
        fi
    done
}

bench_apt_install() {
    local prog="$1" sudo=""
    shift
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || { echo "$prog: $* missing and not root (no sudo)" >&2; exit 2; }
        sudo="sudo"
    fi
    echo "$prog: installing $*" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
}

bench_need_redis() {
    local prog="$1"
    command -v "${REDIS_SERVER:-redis-server}" >/dev/null && return 0
    if [ -n "${REDIS_SERVER:-}" ]; then
        echo "$prog: $REDIS_SERVER not found" >&2
        exit 2
    fi
    # The package starts a system-wide redis on 6379; the benches start their own.
    bench_apt_install "$prog" redis-server
    command -v redis-server >/dev/null || { echo "$prog: redis-server install failed" >&2; exit 2; }
}

bench_exec() {
    local script="$1"
    shift
    MAYFLYD="${MAYFLYD:-build/mayflyd}" exec node "bench/$script" "$@"
}

bench_run() {
    bench_mayflyd
    # shellcheck disable=SC2119  # mongodb only
    bench_node_modules
    bench_exec "$@"
}

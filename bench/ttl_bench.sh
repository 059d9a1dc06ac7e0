#!/usr/bin/env bash
# Expiry benchmark: mayfly's TTL monitor vs Redis key expiry vs a PostgreSQL
# delete job (see the comment at the top of bench/ttl_bench.js). Builds the
# release binary (make all) unless $MAYFLYD is set, installs what the chosen
# systems need when missing (redis-server, postgresql through apt-get; the npm
# packages mongodb and pg through npm ci), then runs the script; extra
# arguments go to it (--docs N, --sample N, --poll MS, --spread SECS,
# --systems mayfly,redis,postgres, --pg-interval SECS, --pg-batch ROWS).
set -euo pipefail
cd "$(dirname "$0")/.."

systems="mayfly,redis,postgres"
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
    if [ "${args[$i]}" = "--systems" ] && [ $((i + 1)) -lt ${#args[@]} ]; then systems="${args[$((i + 1))]}"; fi
done
has() { case ",$systems," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

apt_install() {
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    echo "ttl_bench: installing $*" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
}

if has mayfly && [ -z "${MAYFLYD:-}" ]; then
    make -j2 all >/dev/null
    MAYFLYD="$PWD/build/mayflyd"
fi
if has redis && ! command -v "${REDIS_SERVER:-redis-server}" >/dev/null; then
    [ -z "${REDIS_SERVER:-}" ] && apt_install redis-server
    command -v "${REDIS_SERVER:-redis-server}" >/dev/null || { echo "ttl_bench: redis-server not found" >&2; exit 2; }
fi
if has postgres && [ -z "${PG_BIN:-}" ] && ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 \
        && ! command -v postgres >/dev/null; then
    apt_install postgresql
fi
if [ ! -d node_modules/mongodb ] || [ ! -d node_modules/pg ]; then
    npm ci --no-audit --no-fund --loglevel=error
fi
MAYFLYD="${MAYFLYD:-build/mayflyd}" exec node bench/ttl_bench.js "$@"

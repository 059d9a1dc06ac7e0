#!/usr/bin/env bash
# Expiry benchmark: mayfly's TTL monitor vs Redis key expiry vs a PostgreSQL
# delete job (see the comment at the top of bench/ttl_bench.js). Builds the
# release binary (make -j2 all) unless $MAYFLYD is set, installs what the chosen
# systems need when missing (redis-server, postgresql through apt-get; the npm
# packages mongodb and pg through npm ci), then runs the script; extra
# arguments go to it (--docs N, --sample N, --poll MS, --spread SECS,
# --systems mayfly,redis,postgres, --pg-interval SECS, --pg-batch ROWS).
set -euo pipefail
. "$(dirname "$0")/lib/common.sh"

systems="mayfly,redis,postgres"
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
    if [ "${args[$i]}" = "--systems" ] && [ $((i + 1)) -lt ${#args[@]} ]; then systems="${args[$((i + 1))]}"; fi
done
has() { case ",$systems," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

if has mayfly; then bench_mayflyd; fi
if has redis; then bench_need_redis ttl_bench; fi
if has postgres && [ -z "${PG_BIN:-}" ] && ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 \
        && ! command -v postgres >/dev/null; then
    bench_apt_install ttl_bench postgresql
fi
bench_node_modules pg
bench_exec ttl_bench.js "$@"

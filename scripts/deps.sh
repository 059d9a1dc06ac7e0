#!/usr/bin/env bash
# Installs what building, running and testing mayfly need, on Debian 12, when
# missing: Debian packages through apt-get (as root) and the pinned npm client
# packages through `npm ci`. Safe to run again; does nothing when all is there.
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(build-essential pkg-config libbson-dev libwiredtiger-dev libuv1-dev libpcre2-dev
      libcriterion-dev libjemalloc-dev libstemmer-dev libzstd-dev zlib1g-dev libsnappy-dev libicu-dev libraft-dev libssl-dev openssl libyaml-dev libhttp-parser-dev python3-pymongo python3-snappy python3-zstandard chromium nodejs npm redis-server tzdata
      clang-14 libclang-rt-14-dev)   # the last two: clang and libFuzzer for `make fuzz` (part of `make test`); tzdata: /usr/share/zoneinfo for the date expressions' time zones (src/doc/tz.c); libicu-dev: collations; zlib1g-dev, libsnappy-dev: wire compression (src/net/wire_compress.c); python3-snappy, python3-zstandard: pymongo's snappy and zstd compressors for tests/clients/test_pymongo_compression.py
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# nodejs may come from outside Debian (a preinstalled node); accept any node >= 18.
if command -v node >/dev/null && command -v npm >/dev/null; then
    missing=("${missing[@]/nodejs}"); missing=("${missing[@]/npm}")
fi
want=()
for p in "${missing[@]}"; do [ -n "$p" ] && want+=("$p"); done
if [ "${#want[@]}" -gt 0 ]; then
    echo "deps: installing ${want[*]}"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${want[@]}"
fi
if [ -f package-lock.json ]; then
    if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
        npm ci --no-audit --no-fund --loglevel=error
    fi
fi

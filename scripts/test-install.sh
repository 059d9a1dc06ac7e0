#!/usr/bin/env bash
# Checks `make install` and the embedding API as a user would use them:
# installs into a temporary prefix, builds examples/embed.c with
# `pkg-config --cflags --libs mayfly` against the shared library, and runs it
# (it expires a document through the TTL monitor of an in-memory database).
set -euo pipefail
cd "$(dirname "$0")/.."
prefix="$(mktemp -d /tmp/mayfly-install-XXXXXX)"
trap 'rm -rf "$prefix"' EXIT
make -s -j"$(nproc)" all PREFIX="$prefix" >/dev/null
make -s install PREFIX="$prefix" >/dev/null
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
nm -D --defined-only "$prefix/lib/libmayfly.so" | awk '$2 == "T" {print $3}' | sort > "$prefix/exported"
if [ "$(cat "$prefix/exported" | tr '\n' ' ')" != "mf_db_close mf_db_command mf_db_open mf_db_version " ]; then
    echo "test-install: libmayfly.so exports more than the API:" >&2
    cat "$prefix/exported" >&2
    exit 1
fi
cc -std=c11 -Wall -Wextra -o "$prefix/embed" examples/embed.c $(pkg-config --cflags --libs mayfly)
LD_LIBRARY_PATH="$prefix/lib" "$prefix/embed" 2>/dev/null
echo "test-install: ok"

#!/usr/bin/env bash
# Runs the client-level test suites against a mayflyd binary:
#   scripts/test-clients.sh [path/to/mayflyd]     (default build-asan/mayflyd)
# Node driver, mongoose and mongosh suites run under `node --test`, one file at
# a time (each file starts its own server); then the pymongo suite. Extra
# arguments after the binary are test files to run instead of all of them.
# Exits non-zero if either part fails.
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
    files=("$@")
else
    files=(tests/clients/*.test.js)
fi

echo "== node driver / mongoose / mongosh suites (${#files[@]} files) against $bin"
node --test --test-concurrency=1 --test-timeout=240000 "${files[@]}"
node_rc=$?

py_rc=0
if [ "$#" -eq 0 ]; then
    for py in tests/clients/test_pymongo*.py; do
        echo "== pymongo suite: $py"
        /usr/bin/python3 "$py" || py_rc=1
    done
fi

echo "== client suites: node exit $node_rc, pymongo exit $py_rc"
[ "$node_rc" -eq 0 ] && [ "$py_rc" -eq 0 ]

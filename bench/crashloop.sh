#!/usr/bin/env bash
# Crash loop (issue 10): N cycles of j: true writes + a mass TTL expiry + index
# builds, kill -9 at a random moment, restart, check (see the comment at the
# top of bench/crashloop.js). Builds the release binary (make -j2 all) unless
# $MAYFLYD is set, then runs the script; arguments go to it
# (N or --cycles N, --seed S, --writers N, --due-docs N, --index-docs N,
# --min-window MS, --max-window MS, --logdir DIR, --keep).
# Exit status: 0 clean, 1 a violation was found, 2 the loop could not run.
set -euo pipefail
. "$(dirname "$0")/lib/common.sh"
bench_run crashloop.js "$@"

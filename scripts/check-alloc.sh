#!/usr/bin/env bash
# Fails if any source file allocates without the project's policy
# (src/common/alloc.h): raw malloc/calloc/realloc/strdup/strndup are only
# allowed inside src/common/alloc.c.
set -euo pipefail
cd "$(dirname "$0")/.."
if grep -nE '(^|[^_[:alnum:].>])(malloc|calloc|realloc|strdup|strndup)\(' $(find src include -name '*.[ch]' 2>/dev/null) \
        | grep -v '^src/common/alloc\.[ch]:' | grep -vE ':[0-9]+:\s*(\*|/\*|//)'; then
    echo "check-alloc: raw allocation above; use mf_malloc & co. (src/common/alloc.h)" >&2
    exit 1
fi
echo "check-alloc: ok"

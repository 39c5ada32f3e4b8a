#!/usr/bin/env bash
# The whole x509-limbo suite with and without --cache: the per-case results must be identical.
#   scripts/limbo-cache-check.sh [path/to/limbo.json]
set -euo pipefail
cd "$(dirname "$0")/.."
suite=${1:-/work/shared/x509-limbo/limbo.json}
SCRATCH=${SCRATCH:-.build-release}
swift build -c release --scratch-path "$SCRATCH" --product limbo >&2
BIN="$(swift build -c release --scratch-path "$SCRATCH" --show-bin-path)"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
"$BIN/limbo" "$suite" --results "$work/plain.tsv" | tail -2
"$BIN/limbo" "$suite" --cache --results "$work/cached.tsv" | tail -2
if diff -u "$work/plain.tsv" "$work/cached.tsv"; then
    echo "identical: $(wc -l < "$work/plain.tsv") cases"
else
    echo "DIFFERENT per-case results with --cache" >&2
    exit 1
fi

#!/usr/bin/env bash
# Runs tuf-conformance (../shared/tuf-conformance, theupdateframework/tuf-conformance, MIT) against `pinning tuf`.
#
#   scripts/tuf-conformance.sh [PINNING_BINARY] [-- PYTEST_ARGS…]
#
# Builds `pinning` (debug) unless a binary is given; makes a virtual environment outside the read-only shared folder
# (TUF_CONFORMANCE_VENV, default ~/.cache/swift-pinning/tuf-conformance-venv) with the suite's pinned dependencies
# (SOURCE.txt); installs Debian's faketime when missing; runs every test with no .xfails file. Exit status is
# pytest's: 0 only when every test passed. A JSON report is written to TUF_CONFORMANCE_REPORT (default
# .build/tuf-conformance.json).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
suite="${TUF_CONFORMANCE_DIR:-$root/../shared/tuf-conformance}"
venv="${TUF_CONFORMANCE_VENV:-$HOME/.cache/swift-pinning/tuf-conformance-venv}"
report="${TUF_CONFORMANCE_REPORT:-$root/.build/tuf-conformance.json}"

binary=""
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
  binary="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
  shift
fi
[ "${1:-}" = "--" ] && shift

if [ ! -d "$suite/tuf_conformance" ]; then
  echo "tuf-conformance: no suite at $suite (set TUF_CONFORMANCE_DIR)" >&2
  exit 2
fi

if [ -z "$binary" ]; then
  swift build --product pinning
  binary="$(swift build --product pinning --show-bin-path)/pinning"
fi

if ! command -v faketime >/dev/null 2>&1; then
  echo "== installing faketime"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq faketime >/dev/null
fi

# The suite's pinned dependencies (SOURCE.txt, pyproject.toml), installed once per venv.
pins=("securesystemslib[crypto]==1.4.0" "tuf==7.0.0" "pytest==9.1.1" "pytest-json-report==1.5.0")
stamp="$venv/.swift-pinning-$(printf '%s ' "${pins[@]}" | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "== making $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "${pins[@]}"
  touch "$stamp"
fi

# The suite runs ENTRYPOINT split at spaces and appends the CLIENT-CLI.md arguments: a wrapper makes
# `pinning tuf` one executable path whatever the binary's path holds.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
wrapper="$work/pinning-tuf"
printf '#!/bin/sh\nexec "%s" tuf "$@"\n' "$binary" > "$wrapper"
chmod +x "$wrapper"

mkdir -p "$(dirname "$report")"
cd "$suite"
start=$(date +%s)
status=0
PYTHONPATH=. PYTHONDONTWRITEBYTECODE=1 "$venv/bin/pytest" -p no:cacheprovider -q tuf_conformance \
  --entrypoint "$wrapper" --json-report --json-report-file="$report" "$@" || status=$?
echo "tuf-conformance: pytest exit $status in $(( $(date +%s) - start )) s; report $report"
exit $status

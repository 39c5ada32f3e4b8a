#!/usr/bin/env bash
# Runs the whole test suite under a sanitizer: scripts/sanitizers.sh thread|address|all [swift test args...]
#   thread  → swift test --sanitize=thread  --scratch-path .build-tsan
#   address → swift test --sanitize=address --scratch-path .build-asan
# Each sanitizer has its own scratch path (a full build each; the normal .build is never touched).
# Exit status: non-zero when a test fails or the sanitizer reports anything (a report fails the run even
# where the runtime would only warn: TSan's data-race warnings do not change the exit status by themselves).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
which="${1:-all}"
shift || true

run() {
    local sanitizer="$1" scratch="$2"; shift 2
    local log="$root/$scratch/sanitizer-test.log"
    mkdir -p "$root/$scratch"
    echo "== swift test --sanitize=$sanitizer (log: $log)"
    local status=0
    # halt_on_error=0: see every report of the run, not just the first; the log is checked afterwards.
    # Leaks in dependencies that we cannot fix are suppressed, each with its reason, in the fuzzers' list.
    TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=0 second_deadlock_stack=1}" \
    # print_suppressions=0: the `pinning` subprocesses the CLI tests run would otherwise append LSan's table of
    # suppressions used to their stderr, which the tests compare exactly.
    LSAN_OPTIONS="suppressions=$root/Fuzz/lsan-suppressions.txt:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}" \
    ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1 halt_on_error=1 strict_string_checks=1 detect_stack_use_after_return=1}" \
        swift test --package-path "$root" --sanitize="$sanitizer" --scratch-path "$root/$scratch" "$@" 2>&1 \
        | tee "$log" || status=$?
    local reports
    reports=$(grep -c -E "WARNING: ThreadSanitizer|ERROR: AddressSanitizer|ERROR: LeakSanitizer" "$log" || true)
    echo "== $sanitizer: swift test exit $status, $reports sanitizer report(s)"
    [[ $status -eq 0 && $reports -eq 0 ]]
}

case "$which" in
    thread) run thread .build-tsan "$@" ;;
    address) run address .build-asan "$@" ;;
    all) run thread .build-tsan "$@" && run address .build-asan "$@" ;;
    *) echo "usage: $0 thread|address|all [swift test args...]" >&2; exit 64 ;;
esac

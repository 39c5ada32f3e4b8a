#!/usr/bin/env bash
# Runs the test suite under a sanitizer: scripts/sanitizers.sh thread|address|all|hardening [swift test args...]
#   thread    → the whole suite, swift test --sanitize=thread  --scratch-path .build-tsan
#   address   → the whole suite, swift test --sanitize=address --scratch-path .build-asan
#   hardening → CI's pass (issue 28): AddressSanitizer over the hardening build that the fuzz targets share
#               (our modules instrumented; see scripts/hardening-settings.sh and the end of Package.swift), over
#               the test targets whose code parses untrusted input: the core (certificates, configurations, CRLs,
#               TUF metadata), PinningNIO (peers' handshakes, HTTP answers, fetched repositories), PinningExport
#               (foreign configuration formats), PinningProxy (its clients' requests) and PinningCollector
#               (reports). Of the CLI's suites, which start the `pinning` binary and hand what it reads to those
#               modules, only the ones that reach the CLI's own pointer code run here: in-process parsing
#               (NumericOption, OptionIdiom), `pinning pki` (PKIDirectory's write(2) loop) and the passphrase
#               tests (Passphrase reads getenv's bytes through a raw pointer). The rest of the CLI suite and the
#               framework adapters' run in the plain `swift test`; `address` runs everything under ASan.
# Each has its own scratch path (a full build each; the normal .build is never touched).
# Exit status: non-zero when a test fails or the sanitizer reports anything (a report fails the run even
# where the runtime would only warn: TSan's data-race warnings do not change the exit status by themselves).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=scripts/hardening-settings.sh
source "$root/scripts/hardening-settings.sh"
which="${1:-all}"
shift || true

# run SANITIZER SCRATCH [env VAR=value…] -- [swift test args…]
run() {
    local sanitizer="$1" scratch="$2"; shift 2
    local environment=()
    while [[ $# -gt 0 && "$1" != "--" ]]; do environment+=("$1"); shift; done
    shift || true
    local log="$scratch/sanitizer-test.log"
    mkdir -p "$scratch"
    echo "== swift test --sanitize=$sanitizer (log: $log)"
    local status=0
    # halt_on_error=0: see every report of the run, not just the first; the log is checked afterwards.
    # Leaks in dependencies that we cannot fix are suppressed, each with its reason, in the fuzzers' list.
    # print_suppressions=0: the `pinning` subprocesses the CLI tests run would otherwise append LSan's table of
    # suppressions used to their stderr, which the tests compare exactly.
    env "${environment[@]}" \
    TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=0 second_deadlock_stack=1}" \
    LSAN_OPTIONS="suppressions=$root/Fuzz/lsan-suppressions.txt:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}" \
    ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1 halt_on_error=1 strict_string_checks=1 detect_stack_use_after_return=1}" \
        swift test --package-path "$root" --scratch-path "$scratch" "$@" 2>&1 \
        | tee "$log" || status=$?
    local reports
    reports=$(grep -c -E "WARNING: ThreadSanitizer|ERROR: AddressSanitizer|ERROR: LeakSanitizer" "$log" || true)
    echo "== $sanitizer: swift test exit $status, $reports sanitizer report(s)"
    [[ $status -eq 0 && $reports -eq 0 ]]
}

case "$which" in
    thread) run thread "$root/.build-tsan" -- --sanitize=thread "$@" ;;
    address) run address "$root/.build-asan" -- --sanitize=address "$@" ;;
    all) run thread "$root/.build-tsan" -- --sanitize=thread "$@" && run address "$root/.build-asan" -- --sanitize=address "$@" ;;
    hardening)
        hardening_tests=(
            --filter 'PinningTests\.' --filter 'PinningNIOTests\.' --filter 'PinningExportTests\.'
            --filter 'PinningProxyTests\.' --filter 'PinningCollectorTests\.'
            --filter 'PinningCLITests\.(NumericOptionCLITests|OptionIdiomCLITests|PKICLITests)'
            --filter 'PinningCLITests\.CLIConsistencyTests/(exportAndConnect|passphraseFileRefusals)'
        )
        run address "$hardening_scratch" "${hardening_env[@]}" -- "${hardening_flags[@]}" "${hardening_tests[@]}" "$@" ;;
    *) echo "usage: $0 thread|address|all|hardening [swift test args...]" >&2; exit 64 ;;
esac

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

# The sanitizer runtimes' options, for `run` and for the lanes below.
# halt_on_error=0 (TSan): see every report of the run, not just the first; the log is checked afterwards.
# Leaks in dependencies that we cannot fix are suppressed, each with its reason, in the fuzzers' list.
# print_suppressions=0: the `pinning` subprocesses the CLI tests run would otherwise append LSan's table of
# suppressions used to their stderr, which the tests compare exactly.
lsan_options=LSAN_OPTIONS="suppressions=$root/Fuzz/lsan-suppressions.txt:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
asan_options=ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1 halt_on_error=1 strict_string_checks=1 detect_stack_use_after_return=1}"
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
    env "${environment[@]}" \
    TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=0 second_deadlock_stack=1}" \
    "$lsan_options" \
    "$asan_options" \
        swift test --package-path "$root" --scratch-path "$scratch" "$@" 2>&1 \
        | tee "$log" || status=$?
    local reports
    reports=$(grep -c -E "WARNING: ThreadSanitizer|ERROR: AddressSanitizer|ERROR: LeakSanitizer" "$log" || true)
    echo "== $sanitizer: swift test exit $status, $reports sanitizer report(s)"
    [[ $status -eq 0 && $reports -eq 0 ]]
}

# The test targets of the hardening pass (see the top), in two groups by their kind of work: `local_tests` are
# the core and the CLI subset (CPU-bound parsing and evaluation, the binary's launches), `peer_tests` everything
# that talks to a peer (PinningNIO's loopback clients and servers with openssl and Python, the collector's
# databases, the proxy, the export). `hardening` runs both in one `swift test`; `hardening-lanes` one lane each.
local_tests=(
    --filter 'PinningTests\.'
    --filter 'PinningCLITests\.(NumericOptionCLITests|OptionIdiomCLITests|PKICLITests)'
    --filter 'PinningCLITests\.CLIConsistencyTests/(exportAndConnect|passphraseFileRefusals)'
)
peer_tests=(
    --filter 'PinningNIOTests\.' --filter 'PinningExportTests\.' --filter 'PinningProxyTests\.'
    --filter 'PinningCollectorTests\.'
)
case "$which" in
    thread) run thread "$root/.build-tsan" -- --sanitize=thread "$@" ;;
    address) run address "$root/.build-asan" -- --sanitize=address "$@" ;;
    all) run thread "$root/.build-tsan" -- --sanitize=thread "$@" && run address "$root/.build-asan" -- --sanitize=address "$@" ;;
    hardening)
        run address "$hardening_scratch" "${hardening_env[@]}" -- "${hardening_flags[@]}" "${local_tests[@]}" "${peer_tests[@]}" "$@" ;;
    hardening-lanes)
        # CI's pass: the same tests as `hardening`, in two lanes at once over the hardening build that
        # `scripts/fuzz.sh build --build-tests` made (nothing is built here). Each lane runs one test at a time
        # (as `--no-parallel` did for the whole pass: a loopback timeout measures the code, not a crowd of tests);
        # lane 1 runs `local_tests`, lane 2 `peer_tests`. One test at a time leaves a core mostly idle; the two
        # lanes together take about the longer lane's time (about 215 s of the 395 s in one lane, last measured).
        # The test binary is run directly, not through `swift test`: SwiftPM holds a lock on the scratch directory
        # for a whole `swift test`, so two cannot run at once.
        tests_binary="$hardening_scratch/debug/swift-pinningPackageTests.xctest"
        [[ -x "$tests_binary" ]] || { echo "== $tests_binary not built (run scripts/fuzz.sh build --build-tests first)" >&2; exit 1; }
        pids=()
        for lane in 1 2; do
            log="$hardening_scratch/sanitizer-test-lane$lane.log"
            echo "== lane $lane under AddressSanitizer (log: $log)"
            (
                if [[ $lane -eq 1 ]]; then filters=("${local_tests[@]}"); else filters=("${peer_tests[@]}"); fi
                # SWIFT_BACKTRACE=enable=no: a crash is reported by ASan itself (its SEGV handler, and with
                # handle_sigill/handle_abort a Swift trap too), with the faulting stack. The Swift runtime's own
                # crash handler, which otherwise runs first, reads the crashed process's memory through a server
                # that ASan flags as a heap-buffer-overflow, so a CI run showed only that and not the crash.
                exec env "${hardening_env[@]}" NO_COLOR=1 SWIFT_BACKTRACE=enable=no \
                    "$lsan_options" \
                    "$asan_options handle_sigill=1 handle_abort=1" \
                    "$tests_binary" --testing-library swift-testing --no-parallel "${filters[@]}" "$@"
            ) > "$log" 2>&1 &
            pids+=($!)
        done
        status=0
        for lane in 1 2; do
            lane_status=0
            wait "${pids[$((lane - 1))]}" || lane_status=$?
            log="$hardening_scratch/sanitizer-test-lane$lane.log"
            reports=$(grep -c -E "ERROR: AddressSanitizer|ERROR: LeakSanitizer" "$log" || true)
            echo "== lane $lane: exit $lane_status, $reports sanitizer report(s); $(grep -E "Test run with" "$log" | tail -1)"
            if [[ $lane_status -ne 0 || $reports -ne 0 ]]; then
                status=1
                echo "== lane $lane failed; what failed:"
                grep -E "✘|recorded an issue|ERROR: (Address|Leak)Sanitizer|SUMMARY: |Fatal error|signal" "$log" | head -60 || true
                # The tests that started and never ended (one test at a time: the one that was running when the
                # lane died), then the report's first stack.
                echo "== lane $lane: tests started but not ended:"
                # (A test without a display name is listed by its function name; "recorded an issue" is not an end.)
                sed -n -E '/^◇ Test (case |run started)/d; s/^◇ Test (.*) started\.$/\1/p' "$log" | sort -u > "$log.started" || true
                sed -n -E 's/^[✔✘] Test (.*) (passed|failed) after .*/\1/p' "$log" | sed -E 's/ with [0-9]+ test cases?$//' \
                    | sort -u > "$log.ended" || true
                comm -23 "$log.started" "$log.ended" | head -5 || true
                rm -f "$log.started" "$log.ended"
                echo "== lane $lane: the first report's stack:"
                grep -m1 -A40 -E "ERROR: (Address|Leak)Sanitizer" "$log" | grep -E "^ +#|ERROR|Direct|Indirect" | head -40 | cut -c1-300 || true
                echo "== (the whole output: $log)"
            fi
        done
        exit "$status" ;;
    *) echo "usage: $0 thread|address|all|hardening|hardening-lanes [swift test args...]" >&2; exit 64 ;;
esac

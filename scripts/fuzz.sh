#!/usr/bin/env bash
# Runs libFuzzer targets for a given time:
#   scripts/fuzz.sh TARGET SECONDS [extra libFuzzer flags...]   one target
#   scripts/fuzz.sh all SECONDS                                  every target, after one build (CI)
#   scripts/fuzz.sh build [swift build args...]                  only builds them
#   scripts/fuzz.sh list                                         lists them
# TARGET: FuzzCertificateLoading FuzzPKCS7 FuzzPKCS12 FuzzPin FuzzConfiguration FuzzEvaluation FuzzCRL FuzzPathBuilding FuzzTLSRecords
#
# The targets' sources are in Fuzz/Sources. They exist only in the hardening build of the root package
# (PINNING_HARDENING_BUILD=1, see Package.swift and scripts/hardening-settings.sh): one build with
# AddressSanitizer and libFuzzer's coverage instrumentation, in .build-hardening/, that the sanitizer pass of the
# test suite (`scripts/sanitizers.sh hardening`) shares; the root package's ordinary build and tests never see
# them. Seeds are generated at run time from the fuzzing PKI (fixed keys, see Fuzz/Sources/FuzzSupport) plus
# openssl-made PKCS#7/PKCS#12 of it; nothing that can expire is checked in. The corpus grows in
# .build-hardening/fuzz/corpus/TARGET; crashes, leaks and timeouts land in .build-hardening/fuzz/artifacts/TARGET/
# and make this script exit non-zero.
#
# `all` runs PINNING_FUZZ_JOBS targets at a time (default: the number of cores). libFuzzer is single-threaded, so
# on N cores N targets side by side each get a core for their SECONDS, as one alone would.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=scripts/hardening-settings.sh
source "$root/scripts/hardening-settings.sh"
work="$hardening_scratch/fuzz"
targets=(FuzzCertificateLoading FuzzPKCS7 FuzzPKCS12 FuzzPin FuzzConfiguration FuzzEvaluation FuzzCRL FuzzPathBuilding FuzzTLSRecords)

usage() { echo "usage: $0 TARGET SECONDS [libFuzzer flags...] | $0 all SECONDS | $0 build | $0 list" >&2; exit 64; }
[[ $# -ge 1 ]] || usage

build() {
    env "${hardening_env[@]}" swift build --package-path "$root" --scratch-path "$hardening_scratch" "${hardening_flags[@]}" "$@"
}

bin_path() {
    env "${hardening_env[@]}" swift build --package-path "$root" --scratch-path "$hardening_scratch" "${hardening_flags[@]}" --show-bin-path
}

case "$1" in
    list) printf '%s\n' "${targets[@]}"; exit 0 ;;
    build) shift; build "$@"; exit 0 ;;
    all)
        [[ $# -eq 2 && "$2" =~ ^[0-9]+$ ]] || usage
        seconds="$2"
        # One build for every target, then no more swift invocations: each run below is given the binaries'
        # directory. PINNING_FUZZ_SKIP_BUILD=1 (CI, right after the hardening build) skips even that null build,
        # whose planning alone takes tens of seconds on this graph.
        if [[ "${PINNING_FUZZ_SKIP_BUILD:-0}" != "1" ]]; then build; fi
        if [[ -d "$hardening_scratch/debug" ]]; then
            PINNING_FUZZ_BIN="$hardening_scratch/debug"
        else
            PINNING_FUZZ_BIN="$(bin_path)"
        fi
        export PINNING_FUZZ_BIN
        jobs="${PINNING_FUZZ_JOBS:-$(nproc)}"
        mkdir -p "$work/logs"
        echo "fuzzing ${#targets[@]} targets for ${seconds}s each, $jobs at a time (logs: $work/logs)"
        status=0
        printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} \
            bash -c '"$0" "$1" "$2" >"$3/$1.log" 2>&1; echo "$1: exit $?"' "$0" {} "$seconds" "$work/logs" \
            | tee "$work/logs/summary" || status=$?
        for target in "${targets[@]}"; do
            echo "== $target"
            # libFuzzer's final statistics, and whatever it reported on failure.
            grep -E "^(stat::|Done|INFO: Loaded|INFO: seed corpus|==[0-9]+==|SUMMARY|artifact_prefix|Test unit written|MS:)" \
                "$work/logs/$target.log" | tail -25 || true
        done
        failed=$(grep -v ": exit 0$" "$work/logs/summary" || true)
        if [[ $status -ne 0 || -n "$failed" ]]; then
            echo "== fuzzing failed:"
            echo "$failed"
            for target in $(echo "$failed" | cut -d: -f1); do
                echo "== $target (last 60 lines of $work/logs/$target.log)"
                tail -60 "$work/logs/$target.log"
            done
            exit 1
        fi
        exit 0
        ;;
esac
[[ $# -ge 2 ]] || usage
target="$1"; seconds="$2"; shift 2
[[ " ${targets[*]} " == *" $target "* ]] || { echo "unknown target $target; one of: ${targets[*]}" >&2; exit 64; }
[[ "$seconds" =~ ^[0-9]+$ ]] || usage

if [[ -n "${PINNING_FUZZ_BIN:-}" ]]; then
    binary="$PINNING_FUZZ_BIN/$target"
else
    build --product "$target"
    binary="$(bin_path)/$target"
fi

seeds="$work/seeds/$target"
corpus="$work/corpus/$target"
artifacts="$work/artifacts/$target"
# Each target exports the (deterministic) fuzzing PKI into its own directory: targets may run side by side.
pki="$work/pki/$target"
rm -rf "$seeds"
mkdir -p "$seeds" "$corpus" "$artifacts"

# First pass: LLVMFuzzerInitialize exports the PKI and writes the target's Swift-made seeds.
PINNING_FUZZ_SEEDS="$seeds" PINNING_FUZZ_PKI="$pki" "$binary" -runs=0 >/dev/null 2>&1

# Seeds only openssl makes conveniently, from the same PKI.
case "$target" in
    FuzzPKCS7|FuzzCertificateLoading)
        openssl crl2pkcs7 -nocrl -certfile "$pki/leaf.pem" -certfile "$pki/chain.pem" -outform DER \
            -out "$seeds/seed-chain.p7b"
        openssl crl2pkcs7 -nocrl -certfile "$pki/leaf.pem" -out "$seeds/seed-leaf.p7c"
        ;;
    FuzzPKCS12)
        common=(-inkey "$pki/leaf.key" -in "$pki/leaf.pem" -certfile "$pki/chain.pem" -passout pass:fuzz-pass)
        openssl pkcs12 -export "${common[@]}" -out "$seeds/seed-default.p12"
        openssl pkcs12 -export "${common[@]}" -iter 1 -maciter -macalg sha1 -out "$seeds/seed-sha1mac.p12"
        openssl pkcs12 -export "${common[@]}" -keypbe NONE -certpbe NONE -iter 1 -out "$seeds/seed-plain.p12"
        openssl pkcs12 -export "${common[@]}" -nomac -keypbe NONE -certpbe NONE -out "$seeds/seed-nomac.p12"
        openssl pkcs12 -export -nokeys -in "$pki/leaf.pem" -passout pass:fuzz-pass -out "$seeds/seed-nokeys.p12"
        ;;
esac

echo "fuzzing $target for ${seconds}s (corpus $corpus, artifacts $artifacts)"
# -timeout: one input may take at most 25 s (a PKCS#12 MAC may ask for up to 10,000,000 iterations).
# Leaks in dependencies that we cannot fix are suppressed, each with its reason, in Fuzz/lsan-suppressions.txt.
export LSAN_OPTIONS="suppressions=$root/Fuzz/lsan-suppressions.txt${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
exec "$binary" "$corpus" "$seeds" \
    -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 -max_len=65536 \
    -artifact_prefix="$artifacts/" -print_final_stats=1 "$@"

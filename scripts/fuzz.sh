#!/usr/bin/env bash
# Runs one libFuzzer target for a given time: scripts/fuzz.sh TARGET SECONDS [extra libFuzzer flags...]
#   TARGET: FuzzCertificateLoading FuzzPKCS7 FuzzPKCS12 FuzzPin FuzzConfiguration FuzzEvaluation
#   (`scripts/fuzz.sh build` only builds them; `scripts/fuzz.sh list` lists them.)
#
# The targets live in the separate package Fuzz/ (they need -sanitize=fuzzer,address, which the root package's
# build and tests must never get) and are built into .build-fuzz/. Seeds are generated at run time from the
# fuzzing PKI (fixed keys, see Fuzz/Sources/FuzzSupport) plus openssl-made PKCS#7/PKCS#12 of it; nothing that
# can expire is checked in. The corpus grows in .build-fuzz/corpus/TARGET; crashes, leaks and timeouts land in
# .build-fuzz/artifacts/TARGET/ and make this script exit non-zero.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
scratch="$root/.build-fuzz"
targets=(FuzzCertificateLoading FuzzPKCS7 FuzzPKCS12 FuzzPin FuzzConfiguration FuzzEvaluation FuzzCRL)

usage() { echo "usage: $0 TARGET SECONDS [libFuzzer flags...] | $0 build | $0 list" >&2; exit 64; }
[[ $# -ge 1 ]] || usage

build() {
    # Pin the fuzz package's dependencies to the versions the root package resolved.
    if [[ -f "$root/Package.resolved" && ! -f "$root/Fuzz/Package.resolved" ]]; then
        cp "$root/Package.resolved" "$root/Fuzz/Package.resolved"
    fi
    swift build --package-path "$root/Fuzz" --scratch-path "$scratch" \
        -Xswiftc -sanitize=fuzzer,address -Xswiftc -g "$@"
}

case "$1" in
    list) printf '%s\n' "${targets[@]}"; exit 0 ;;
    build) build; exit 0 ;;
esac
[[ $# -ge 2 ]] || usage
target="$1"; seconds="$2"; shift 2
[[ " ${targets[*]} " == *" $target "* ]] || { echo "unknown target $target; one of: ${targets[*]}" >&2; exit 64; }
[[ "$seconds" =~ ^[0-9]+$ ]] || usage

build --product "$target"
binary="$(swift build --package-path "$root/Fuzz" --scratch-path "$scratch" \
    -Xswiftc -sanitize=fuzzer,address -Xswiftc -g --show-bin-path)/$target"

seeds="$scratch/seeds/$target"
corpus="$scratch/corpus/$target"
artifacts="$scratch/artifacts/$target"
pki="$scratch/pki"
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

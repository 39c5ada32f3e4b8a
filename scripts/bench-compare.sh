#!/usr/bin/env bash
# Runs `pinning bench` (release build) and scripts/pyca-bench.py side by side on the same chains, roots, host and
# validation time, and prints the ratios the issue's targets are stated in.
#
#   scripts/bench-compare.sh                  # five chain shapes (below), 3 alternating rounds each
#   SHAPES="p256 p384" scripts/bench-compare.sh   # only these shapes (MEMORY=1 needs p256 among them)
#   ITERATIONS=5000 ROUNDS=5 scripts/bench-compare.sh
#   BASELINE=/tmp/pinning-main scripts/bench-compare.sh   # also an older binary's cold/s (and handshakes), interleaved
#   INSTRUCTIONS=1 scripts/bench-compare.sh   # also instructions per cold evaluation (valgrind), ours and pyca's
#   CPU=1 scripts/bench-compare.sh            # also CPU time per cold evaluation (user + system of the process),
#                                             # ours, pyca's (and BASELINE's), CPU_ROUNDS alternating rounds, medians
#   HANDSHAKE=1 scripts/bench-compare.sh      # also `pinning bench handshake` (pinned vs NIOSSL verification;
#                                             # CONNECTIONS, CONCURRENCY, HANDSHAKE_ROUNDS, CACHE=1 for --cache),
#                                             # with one server leaf and with LEAVES (default 1000) rotating leaves
#   LIMBO=1 scripts/bench-compare.sh          # also the full limbo run time (needs x509-limbo's limbo.json)
#   SERVER=1 scripts/bench-compare.sh         # also `pinning bench handshake --server` (an mTLS server judging
#                                             # CLIENTS distinct client certificates vs NIOSSL's client verification,
#                                             # then resumed TLS 1.2 sessions through `openssl s_time -reuse`)
#   COLD=1 scripts/bench-compare.sh           # also whole-process `pinning evaluate` vs `openssl verify` (COLD_RUNS
#                                             # alternating runs each, medians, peak RSS), explicit roots and the
#                                             # platform store
#   INTEGRATIONS=1 scripts/bench-compare.sh   # also requests/s through the gRPC, HTTP/2 and Vapor integrations
#                                             # beside the same framework with NIOSSL's own verification
#                                             # (IntegrationBench; INTEGRATION_REQUESTS, default 2000)
#
# The release build links the Swift runtime and Foundation statically (--static-swift-stdlib), as a command-line
# tool is shipped: it starts ~9 ms sooner than one loading them as shared libraries.
#
# Chains: root → intermediates → leaf for bench.example, minted with openssl into a temporary directory; the
# chain file is what a server sends (leaf, then intermediates upwards), the roots file the root alone (the only
# anchor for both verifiers). Shapes: p256 and rsa2048 (3 certificates, SHA-256), p256-2 (root → leaf),
# p256-4 (two intermediates), p384 (3 certificates, P-384 keys, SHA-384 signatures).
set -euo pipefail
cd "$(dirname "$0")/.."
ITERATIONS=${ITERATIONS:-2000}
ROUNDS=${ROUNDS:-3}
SCRATCH=${SCRATCH:-.build-release}

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then swift build -c release --static-swift-stdlib --scratch-path "$SCRATCH" --product pinning >&2; fi
BIN="$SCRATCH/release"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cat > "$work/ext.cnf" <<'CNF'
[req]
distinguished_name = dn
[dn]
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
[leaf]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = DNS:bench.example
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
CNF

mint() { # dir length digest keyargs...: a chain of `length` certificates, root → (length − 2 intermediates) → leaf
    local dir=$1 length=$2 digest=$3; shift 3
    mkdir -p "$dir"
    local names=(root) issuer=root
    for index in $(seq 2 $((length - 1))); do names+=("intermediate$((index - 1))"); done
    names+=(leaf)
    for name in "${names[@]}"; do openssl genpkey "$@" -out "$dir/$name.key" 2>/dev/null; done
    openssl req -x509 -new -key "$dir/root.key" -subj "/CN=Bench Root CA" -days 3650 "-$digest" \
        -config "$work/ext.cnf" -extensions ca -out "$dir/root.pem"
    : > "$dir/chain.pem"
    for name in "${names[@]:1}"; do
        local subject="/CN=Bench ${name^} CA" extensions=ca
        [[ "$name" == leaf ]] && subject="/CN=bench.example" extensions=leaf
        openssl req -new -key "$dir/$name.key" -subj "$subject" -config "$work/ext.cnf" -out "$dir/$name.csr"
        openssl x509 -req -in "$dir/$name.csr" -CA "$dir/$issuer.pem" -CAkey "$dir/$issuer.key" -CAcreateserial -days 365 \
            "-$digest" -extfile "$work/ext.cnf" -extensions "$extensions" -out "$dir/$name.pem" 2>/dev/null
        issuer=$name
    done
    # The chain as a server sends it: leaf first, then the intermediates from the leaf's issuer up; never the root.
    for index in $(seq $((${#names[@]} - 1)) -1 1); do cat "$dir/${names[$index]}.pem" >> "$dir/chain.pem"; done
}
# Chain shapes (SHAPES, default all): the 3-certificate P-256 and RSA-2048 chains of the earlier figures, a
# 2-certificate chain (a leaf issued by the root), a 4-certificate chain (two intermediates) and P-384 (SHA-384).
SHAPES=${SHAPES:-p256 rsa2048 p256-2 p256-4 p384}
for shape in $SHAPES; do
    case "$shape" in
        p256) mint "$work/$shape" 3 sha256 -algorithm EC -pkeyopt ec_paramgen_curve:P-256 ;;
        rsa2048) mint "$work/$shape" 3 sha256 -algorithm RSA -pkeyopt rsa_keygen_bits:2048 ;;
        p256-2) mint "$work/$shape" 2 sha256 -algorithm EC -pkeyopt ec_paramgen_curve:P-256 ;;
        p256-4) mint "$work/$shape" 4 sha256 -algorithm EC -pkeyopt ec_paramgen_curve:P-256 ;;
        p384) mint "$work/$shape" 3 sha384 -algorithm EC -pkeyopt ec_paramgen_curve:P-384 ;;
        *) echo "bench-compare.sh: unknown chain shape '$shape' in SHAPES (p256 rsa2048 p256-2 p256-4 p384)" >&2; exit 2 ;;
    esac
done
# Two minutes after minting: the cache counts a hit only strictly inside every validity period, and openssl
# sets notBefore to the second of minting.
AT="$(date -u -d '+2 minutes' +%Y-%m-%dT%H:%M:%SZ)"

median() { python3 -c 'import statistics,sys; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }

echo "pinning bench vs pyca/cryptography $(python3 -c 'import cryptography; print(cryptography.__version__)'), $ITERATIONS iterations, $ROUNDS alternating rounds, --at $AT"
# "cold/s": every evaluation with the process-wide memos emptied first (`bench --cold`: facts decoded and both
# signatures verified each time), the figure to hold against pyca, which remembers nothing between verifications.
# BASELINE=path/to/an/older/pinning adds that binary's cold/s, measured in the same rounds (before/after a change,
# interleaved, as the machine's load drifts), and the ratio of ours to it.
BASELINE=${BASELINE:-}
if [[ "${TIMED:-1}" == 1 ]]; then # TIMED=0: skip the timed rounds (e.g. INSTRUCTIONS=1 alone)
    printf '%-9s %14s %14s %14s %14s %9s %9s %9s %12s' chain "pinning/s" "cold/s" "cached/s" "pyca/s" "vs pyca" "cold vs" "cached×" "p50 µs"
    [[ -n "$BASELINE" ]] && printf ' %14s %9s' "base cold/s" "÷ base"
    printf '   load average\n'
    for kind in $SHAPES; do
        dir="$work/$kind"
        ours=(); cold=(); cached=(); pyca=(); p50=(); base=()
        load_before=$(cut -d' ' -f1 /proc/loadavg)
        for _ in $(seq "$ROUNDS"); do
            out="$("$BIN/pinning" bench --chain "$dir/chain.pem" --roots "$dir/root.pem" --host bench.example --at "$AT" \
                --iterations "$ITERATIONS" --json)"
            ours+=("$(field "$out" evaluationsPerSecond)"); cached+=("$(field "$out" cachedEvaluationsPerSecond)"); p50+=("$(field "$out" p50Microseconds)")
            out="$("$BIN/pinning" bench --chain "$dir/chain.pem" --roots "$dir/root.pem" --host bench.example --at "$AT" \
                --iterations "$ITERATIONS" --cached-iterations 1 --cold --json)"
            cold+=("$(field "$out" evaluationsPerSecond)")
            py="$(python3 scripts/pyca-bench.py --chain "$dir/chain.pem" --roots "$dir/root.pem" --host bench.example --at "$AT" \
                --iterations "$ITERATIONS" --json)"
            pyca+=("$(field "$py" evaluationsPerSecond)")
            if [[ -n "$BASELINE" ]]; then
                out="$("$BASELINE" bench --chain "$dir/chain.pem" --roots "$dir/root.pem" --host bench.example --at "$AT" \
                    --iterations "$ITERATIONS" --cached-iterations 1 --cold --json)"
                base+=("$(field "$out" evaluationsPerSecond)")
            fi
        done
        o=$(median "${ours[@]}"); k=$(median "${cold[@]}"); c=$(median "${cached[@]}"); p=$(median "${pyca[@]}"); l=$(median "${p50[@]}")
        printf '%-9s %14.0f %14.0f %14.0f %14.0f %8.2f× %8.2f× %8.0f× %12.1f' "$kind" "$o" "$k" "$c" "$p" \
            "$(python3 -c "print($o/$p)")" "$(python3 -c "print($k/$p)")" "$(python3 -c "print($c/$o)")" "$l"
        if [[ -n "$BASELINE" ]]; then
            b=$(median "${base[@]}")
            printf ' %14.0f %8.2f×' "$b" "$(python3 -c "print($k/$b)")"
        fi
        printf '   %s–%s\n' "$load_before" "$(cut -d' ' -f1 /proc/loadavg)"
    done
fi

# INSTRUCTIONS=1: instructions executed per cold evaluation, counted by valgrind (callgrind), ours and pyca's (and
# BASELINE's): the same for any load on the machine, where rates on a shared machine swing ±10–20% run to run.
# Each figure is (count at 300 iterations − count at 100) / 200, so start-up cancels out. Instructions are not time
# (the ECDSA code retires more instructions per cycle than a Python interpreter or Swift's reference counting), so
# this is the figure to see our own work change by, beside the timed ratio, not instead of it.
if [[ "${INSTRUCTIONS:-0}" == 1 ]]; then
    command -v valgrind >/dev/null || { echo "bench-compare.sh: INSTRUCTIONS=1 needs valgrind (apt-get install valgrind)" >&2; exit 2; }
    # valgrind cannot read the debug information of the static release binary; a stripped copy runs the same code.
    strip -o "$work/pinning.stripped" "$BIN/pinning"
    [[ -n "$BASELINE" ]] && strip -o "$work/baseline.stripped" "$BASELINE"
    instructions() { # command... (with ITER in it) → instructions per iteration
        local counts=()
        for iterations in 100 300; do
            counts+=("$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "${@//ITER/$iterations}" 2>&1 >/dev/null \
                | sed -n 's/.*Collected : *\([0-9]*\).*/\1/p')")
        done
        python3 -c "import sys; print(round((int(sys.argv[2]) - int(sys.argv[1])) / 200))" "${counts[@]}"
    }
    printf '%-9s %16s %16s %9s' chain "ours instr/eval" "pyca instr/eval" "÷ pyca"
    [[ -n "$BASELINE" ]] && printf ' %16s %9s' "base instr/eval" "÷ base"
    printf '\n'
    for kind in $SHAPES; do
        dir="$work/$kind"
        ours=$(instructions "$work/pinning.stripped" bench --chain "$dir/chain.pem" --roots "$dir/root.pem" --host bench.example \
            --at "$AT" --iterations ITER --cached-iterations 1 --cold --json)
        # The interpreter itself (python3 may be a launcher script, such as pyenv's shim, which valgrind would count).
        theirs=$(instructions "$(python3 -c 'import sys; print(sys.executable)')" scripts/pyca-bench.py --chain "$dir/chain.pem" --roots "$dir/root.pem" --host bench.example \
            --at "$AT" --iterations ITER --json)
        printf '%-9s %16s %16s %8.2f×' "$kind" "$ours" "$theirs" "$(python3 -c "print($ours/$theirs)")"
        if [[ -n "$BASELINE" ]]; then
            base=$(instructions "$work/baseline.stripped" bench --chain "$dir/chain.pem" --roots "$dir/root.pem" --host bench.example \
                --at "$AT" --iterations ITER --cached-iterations 1 --cold --json)
            printf ' %16s %8.2f×' "$base" "$(python3 -c "print($ours/$base)")"
        fi
        printf '\n'
    done
fi

# CPU=1: CPU time (user + system) per cold evaluation, ours and pyca's (and BASELINE's): (CPU of a run of 4,000
# evaluations − CPU of a run of 1,000) / 3,000, so start-up cancels out; CPU_ROUNDS (default 5) alternating rounds,
# medians. The timed rates above are wall time around each evaluation, which on a loaded 2-core machine includes
# the time the evaluation waited for a core (the same binary's cold/s moved 15% between two runs of one round);
# CPU time counts only the work, so it moves far less with the load. Ours includes the untimed emptying of the
# memos before each evaluation, so it slightly overstates ours.
if [[ "${CPU:-0}" == 1 ]]; then
    printf '%-9s %16s %16s %9s' chain "ours CPU µs/eval" "pyca CPU µs/eval" "pyca ÷ ours"
    [[ -n "$BASELINE" ]] && printf ' %16s %9s' "base CPU µs/eval" "base ÷ ours"
    printf '   load average\n'
    for kind in $SHAPES; do
        dir="$work/$kind"
        load_before=$(cut -d' ' -f1 /proc/loadavg)
        printf '%-9s' "$kind"
        python3 - "$BIN/pinning" "${BASELINE:-}" "$dir" "$AT" "${CPU_ROUNDS:-5}" <<'PY'
import os, statistics, subprocess, sys
ours, baseline, chain_dir, at, rounds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
common = ["--chain", f"{chain_dir}/chain.pem", "--roots", f"{chain_dir}/root.pem", "--host", "bench.example", "--at", at]
def command(who, iterations):
    if who == "pyca":
        return [sys.executable, "scripts/pyca-bench.py", *common, "--iterations", str(iterations), "--json"]
    return [who, "bench", *common, "--iterations", str(iterations), "--cached-iterations", "1", "--cold", "--json"]
def cpu(command):
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, command
    return usage.ru_utime + usage.ru_stime
who = [ours, "pyca"] + ([baseline] if baseline else [])
per = {name: [] for name in who}
for _ in range(rounds):
    for name in who:
        per[name].append((cpu(command(name, 4000)) - cpu(command(name, 1000))) / 3000 * 1e6)
o, p = statistics.median(per[ours]), statistics.median(per["pyca"])
line = f" {o:16.1f} {p:16.1f} {p / o:8.2f}×"
if baseline:
    b = statistics.median(per[baseline])
    line += f" {b:16.1f} {b / o:8.3f}×"
print(line, end="")
PY
        printf '   %s–%s\n' "$load_before" "$(cut -d' ' -f1 /proc/loadavg)"
    done
fi

if [[ "${MEMORY:-0}" == 1 ]]; then
    small="$("$BIN/pinning" bench --chain "$work/p256/chain.pem" --roots "$work/p256/root.pem" --host bench.example --at "$AT" --iterations 10000 --cached-iterations 10000 --json)"
    large="$("$BIN/pinning" bench --chain "$work/p256/chain.pem" --roots "$work/p256/root.pem" --host bench.example --at "$AT" --iterations 1000000 --cached-iterations 10000 --json)"
    s=$(field "$small" peakRSSBytes); L=$(field "$large" peakRSSBytes)
    echo "peak RSS after 10,000 evaluations: $s bytes; after 1,000,000: $L bytes; ratio $(python3 -c "print(round($L/$s, 3))")"
fi

if [[ "${HANDSHAKE:-0}" == 1 ]]; then
    extra=(); [[ "${CACHE:-0}" == 1 ]] && extra+=(--cache)
    for key in p256 rsa2048; do
        for leaves in 1 "${LEAVES:-1000}"; do
            out="$("$BIN/pinning" bench handshake --key "$key" --leaves "$leaves" --connections "${CONNECTIONS:-1000}" \
                --concurrency "${CONCURRENCY:-8}" --rounds "${HANDSHAKE_ROUNDS:-5}" "${extra[@]}" --json)"
            h=$(field "$out" handshakesPerSecond); b=$(field "$out" baselineHandshakesPerSecond); u=$(field "$out" unverifiedHandshakesPerSecond)
            printf 'handshake %-8s %5s leaves  pinned %8.1f/s  NIOSSL-verified %8.1f/s  unverified %8.1f/s  pinned/NIOSSL %.3f×  load %s\n' \
                "$key" "$leaves" "$h" "$b" "$u" "$(python3 -c "print($h/$b)")" "$(cut -d' ' -f1 /proc/loadavg)"
            if [[ -n "$BASELINE" ]]; then # the older binary right after, same arguments
                out="$("$BASELINE" bench handshake --key "$key" --leaves "$leaves" --connections "${CONNECTIONS:-1000}" \
                    --concurrency "${CONCURRENCY:-8}" --rounds "${HANDSHAKE_ROUNDS:-5}" "${extra[@]}" --json)"
                h=$(field "$out" handshakesPerSecond); b=$(field "$out" baselineHandshakesPerSecond); u=$(field "$out" unverifiedHandshakesPerSecond)
                printf 'baseline  %-8s %5s leaves  pinned %8.1f/s  NIOSSL-verified %8.1f/s  unverified %8.1f/s  pinned/NIOSSL %.3f×  load %s\n' \
                    "$key" "$leaves" "$h" "$b" "$u" "$(python3 -c "print($h/$b)")" "$(cut -d' ' -f1 /proc/loadavg)"
            fi
        done
    done
fi

if [[ "${SERVER:-0}" == 1 ]]; then
    for key in p256 rsa2048; do
        out="$("$BIN/pinning" bench handshake --server --clients "${CLIENTS:-1000}" --key "$key" --connections "${CONNECTIONS:-1500}" \
            --concurrency "${CONCURRENCY:-8}" --rounds "${HANDSHAKE_ROUNDS:-5}" --json)"
        h=$(field "$out" handshakesPerSecond); b=$(field "$out" baselineHandshakesPerSecond); u=$(field "$out" unverifiedHandshakesPerSecond)
        printf 'mTLS server %-8s pinned %8.1f/s  NIOSSL-verified %8.1f/s  no client cert %8.1f/s  pinned/NIOSSL %.3f×\n' "$key" "$h" "$b" "$u" "$(python3 -c "print($h/$b)")"
        for cache in "" --cache; do
            out="$("$BIN/pinning" bench handshake --server --resume $cache --key "$key" --seconds "${RESUME_SECONDS:-2}" \
                --rounds "${HANDSHAKE_ROUNDS:-5}" --clients 1 --json)"
            h=$(field "$out" handshakesPerSecond); b=$(field "$out" baselineHandshakesPerSecond); u=$(field "$out" unverifiedHandshakesPerSecond)
            printf 'mTLS resumed %-7s %-7s pinned %8.1f/s  NIOSSL-verified %8.1f/s  no client cert %8.1f/s  pinned/NIOSSL %.3f×\n' \
                "$key" "$cache" "$h" "$b" "$u" "$(python3 -c "print($h/$b)")"
        done
    done
fi

if [[ "${COLD:-0}" == 1 ]]; then
    cold="$work/cold"  # under $work: the EXIT trap removes it if a step fails
    mkdir "$cold"
    "$BIN/pinning" pki init "$cold/pki" >/dev/null
    "$BIN/pinning" pki issue "$cold/pki" --intermediate int >/dev/null
    "$BIN/pinning" pki issue "$cold/pki" --server bench --dns bench.example --issuer int >/dev/null
    store_root="${STORE_ROOT:-/etc/ssl/certs/ISRG_Root_X1.pem}"
    python3 - "$BIN/pinning" "$cold/pki" "$store_root" "${COLD_RUNS:-40}" <<'PY'
import os, statistics, subprocess, sys, time
pinning, pki, store_root, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
cases = {
    "explicit roots": (
        [pinning, "evaluate", "--chain", f"{pki}/bench-chain.pem", "--roots", f"{pki}/root.pem", "--host", "bench.example"],
        ["openssl", "verify", "-CAfile", f"{pki}/root.pem", "-untrusted", f"{pki}/int.pem", "-verify_hostname", "bench.example", f"{pki}/bench.pem"],
    ),
    # A root of the platform store given as the chain: both load the whole store and find it there.
    "platform store": ([pinning, "evaluate", "--chain", store_root], ["openssl", "verify", store_root]),
}
def run(command):
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, command
    return time.perf_counter() - started, usage.ru_utime + usage.ru_stime, usage.ru_maxrss
for name, (ours, theirs) in cases.items():
    times = {"pinning": [], "openssl": []}
    cpu = {"pinning": [], "openssl": []}
    rss = {"pinning": 0, "openssl": 0}
    load = os.getloadavg()[0]
    for _ in range(runs):
        for label, command in (("pinning", ours), ("openssl", theirs)):
            seconds, processor, peak = run(command)
            times[label].append(seconds)
            cpu[label].append(processor)
            rss[label] = max(rss[label], peak)
    p, o = statistics.median(times["pinning"]), statistics.median(times["openssl"])
    pc, oc = statistics.median(cpu["pinning"]), statistics.median(cpu["openssl"])
    # Wall time is the figure; CPU time (user + system, both processes' medians) beside it, as on a loaded
    # machine the wall time of a short process is mostly waiting for a core.
    print(f"cold {name:15} pinning evaluate {p*1000:6.1f} ms ({rss['pinning']/1024:.1f} MiB)  openssl verify {o*1000:6.1f} ms ({rss['openssl']/1024:.1f} MiB)  ratio {p/o:.2f}×"
          f"  CPU {pc*1000:.1f} vs {oc*1000:.1f} ms, {pc/oc:.2f}×  load average {load:.1f}–{os.getloadavg()[0]:.1f}")
PY
    rm -rf "$cold"
fi

if [[ "${LIMBO:-0}" == 1 ]]; then
    if [[ "${SKIP_BUILD:-0}" != 1 ]]; then swift build -c release --scratch-path "$SCRATCH" --product limbo >&2; fi
    suite=${LIMBO_JSON:-/work/shared/x509-limbo/limbo.json}
    start=$(date +%s.%N); "$BIN/limbo" "$suite" > "$work/limbo.txt"; end=$(date +%s.%N)
    ours=$(python3 -c "print(round($end-$start, 2))")
    start=$(date +%s.%N); python3 scripts/pyca-limbo.py "$suite" > "$work/pyca-limbo.txt"; end=$(date +%s.%N)
    theirs=$(python3 -c "print(round($end-$start, 2))")
    echo "limbo (release): $(tail -1 "$work/limbo.txt"); $ours s wall"
    echo "pyca limbo:      $(cat "$work/pyca-limbo.txt"); $theirs s wall (process)"
    echo "limbo time ratio pinning/pyca: $(python3 -c "print(round($ours/$theirs, 2))")"
fi

if [[ "${INTEGRATIONS:-0}" == 1 ]]; then
    # Its own executable (the CLI does not link Vapor or gRPC); dynamically linked, as a server is deployed.
    if [[ "${SKIP_BUILD:-0}" != 1 ]]; then swift build -c release --scratch-path "$SCRATCH" --product IntegrationBench >&2; fi
    for integration in grpc http2 vapor; do
        echo "== $integration"
        "$BIN/IntegrationBench" "$integration" --requests "${INTEGRATION_REQUESTS:-2000}" --rounds "${HANDSHAKE_ROUNDS:-5}"
    done
fi

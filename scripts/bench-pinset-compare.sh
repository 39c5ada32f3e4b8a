#!/usr/bin/env bash
# Runs `pinning bench pinset` of two builds interleaved (A B B A in each round), so that both see the same load on a
# shared machine, and prints each run's apply and parse medians, the peak resident set (/usr/bin/time -v) and the
# load, then the medians over the rounds of each build and of the per-round ratios B/A.
#
#   scripts/bench-pinset-compare.sh OLD_BINARY NEW_BINARY [HOSTS] [ROUNDS] [APPLIES]
#   scripts/bench-pinset-compare.sh /tmp/pinning-main .build-release/release/pinning 10000 8 5
#
# Memory over many refreshes is a separate, longer run: `pinning bench pinset --refreshes 10000 --json`.
set -euo pipefail
OLD=$1
NEW=$2
HOSTS=${3:-10000}
ROUNDS=${4:-8}
APPLIES=${5:-5}
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

run() { # label binary round slot
    local file="$out/$1-$3-$4"
    /usr/bin/time -v "$2" bench pinset --hosts "$HOSTS" --applies "$APPLIES" --refreshes 0 --json > "$file.json" 2> "$file.time"
}
for round in $(seq 1 "$ROUNDS"); do
    run A "$OLD" "$round" 1
    run B "$NEW" "$round" 1
    run B "$NEW" "$round" 2
    run A "$OLD" "$round" 2
done
python3 - "$out" "$ROUNDS" <<'PY'
import json, os, re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def read(label, rnd, slot):
    base = os.path.join(out, f"{label}-{rnd}-{slot}")
    report = json.load(open(base + ".json"))
    peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(base + ".time").read()).group(1))
    return report["apply"]["medianMilliseconds"], report["apply"]["parseMedianMilliseconds"], peak / 1024, report["load"]["oneMinute"]
rows = {"A": [], "B": []}
ratios_apply, ratios_parse, loads = [], [], []
for rnd in range(1, rounds + 1):
    runs = {label: [read(label, rnd, slot) for slot in (1, 2)] for label in "AB"}
    for label in "AB":
        rows[label] += runs[label]
        for apply, parse, peak, load in runs[label]:
            loads.append(load)
            print(f"round {rnd} {label}: apply {apply:8.2f} ms  parse {parse:7.2f} ms  peak RSS {peak:6.1f} MiB  load {load}")
    a = [statistics.median(x[i] for x in runs["A"]) for i in (0, 1)]
    b = [statistics.median(x[i] for x in runs["B"]) for i in (0, 1)]
    ratios_apply.append(b[0] / a[0])
    ratios_parse.append(b[1] / a[1])
for label, name in (("A", "old"), ("B", "new")):
    r = rows[label]
    print(f"{name}: apply median {statistics.median(x[0] for x in r):.1f} ms (runs {min(x[0] for x in r):.0f}-{max(x[0] for x in r):.0f}), "
          f"parse median {statistics.median(x[1] for x in r):.1f} ms, peak RSS median {statistics.median(x[2] for x in r):.0f} MiB")
print(f"ratio new/old (median of rounds): apply {statistics.median(ratios_apply):.2f}, parse {statistics.median(ratios_parse):.2f}; load {min(loads)}-{max(loads)}")
PY

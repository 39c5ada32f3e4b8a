#!/usr/bin/env python3
"""Times pyca/cryptography's X.509 server verifier on the same inputs as `pinning bench`.

    scripts/pyca-bench.py --chain chain.pem --roots root.pem --host bench.example --at 2026-11-22T00:00:00Z \
        [--iterations N] [--json]

The chain is the PEM bundle the server sends (leaf first), the roots the only trust anchors, the time the
validation instant. The verifier is built once (as a long-lived client would) and `verify` is timed, so the
figure is pyca's best case. Prints evaluations/s, or JSON {"evaluationsPerSecond", "p50Microseconds",
"p99Microseconds", "cryptography"}.
"""
import argparse
import datetime
import ipaddress
import json
import sys
import time

import cryptography
from cryptography import x509
from cryptography.x509.verification import PolicyBuilder, Store


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chain", required=True)
    parser.add_argument("--roots", required=True)
    parser.add_argument("--host", required=True)
    parser.add_argument("--at", required=True, help="RFC 3339 validation time")
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    with open(args.chain, "rb") as handle:
        chain = x509.load_pem_x509_certificates(handle.read())
    with open(args.roots, "rb") as handle:
        roots = x509.load_pem_x509_certificates(handle.read())
    at = datetime.datetime.fromisoformat(args.at.replace("Z", "+00:00"))
    try:
        name = x509.IPAddress(ipaddress.ip_address(args.host))
    except ValueError:
        name = x509.DNSName(args.host)
    verifier = PolicyBuilder().store(Store(roots)).time(at).build_server_verifier(name)
    leaf, intermediates = chain[0], chain[1:]

    verifier.verify(leaf, intermediates)  # fails loudly if pyca does not trust the chain
    latencies = []
    started = time.perf_counter()
    for _ in range(args.iterations):
        before = time.perf_counter()
        verifier.verify(leaf, intermediates)
        latencies.append(time.perf_counter() - before)
    elapsed = time.perf_counter() - started
    latencies.sort()

    def percentile(fraction: float) -> float:
        rank = max(0, min(len(latencies) - 1, int(-(-fraction * len(latencies) // 1)) - 1))
        return latencies[rank] * 1e6

    result = {
        "evaluationsPerSecond": round(args.iterations / elapsed, 1),
        "p50Microseconds": round(percentile(0.50), 1),
        "p99Microseconds": round(percentile(0.99), 1),
        "cryptography": cryptography.__version__,
    }
    if args.json:
        print(json.dumps(result, sort_keys=True))
    else:
        print(f"pyca/cryptography {cryptography.__version__}: {result['evaluationsPerSecond']} evaluations/s "
              f"(p50 {result['p50Microseconds']} µs, p99 {result['p99Microseconds']} µs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

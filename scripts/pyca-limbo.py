#!/usr/bin/env python3
"""Runs x509-limbo's SERVER cases through pyca/cryptography's verifier and prints pass/fail and wall time, for
comparing the full-suite run time with `limbo` (see scripts/bench-compare.sh LIMBO=1).

    scripts/pyca-limbo.py [path/to/limbo.json]

Cases with CRLs, custom signature-algorithm or key-usage sets are skipped, as the limbo runner skips them.
"""
import datetime
import ipaddress
import json
import sys
import time

from cryptography import x509
from cryptography.x509.verification import PolicyBuilder, Store


def run(case) -> bool:
    trusted = [x509.load_pem_x509_certificate(pem.encode()) for pem in case["trusted_certs"]]
    intermediates = [x509.load_pem_x509_certificate(pem.encode()) for pem in case["untrusted_intermediates"]]
    leaf = x509.load_pem_x509_certificate(case["peer_certificate"].encode())
    builder = PolicyBuilder().store(Store(trusted))
    if case.get("validation_time"):
        builder = builder.time(datetime.datetime.fromisoformat(case["validation_time"].replace("Z", "+00:00")))
    if case.get("max_chain_depth") is not None:
        builder = builder.max_chain_depth(case["max_chain_depth"])
    peer = case.get("expected_peer_name") or {}
    if peer.get("kind") == "IP":
        name = x509.IPAddress(ipaddress.ip_address(peer["value"]))
    else:
        name = x509.DNSName(peer.get("value", "example.com"))
    builder.build_server_verifier(name).verify(leaf, intermediates)
    return True


def main() -> int:
    path = sys.argv[1] if len(sys.argv) > 1 else "/work/shared/x509-limbo/limbo.json"
    with open(path) as handle:
        cases = [c for c in json.load(handle)["testcases"] if c["validation_kind"] == "SERVER"]
    passed = failed = skipped = 0
    started = time.perf_counter()
    for case in cases:
        if case.get("crls") or case.get("signature_algorithms") or case.get("key_usage") or \
                (case.get("extended_key_usage") and case["extended_key_usage"] != ["serverAuth"]):
            skipped += 1
            continue
        try:
            accepted = run(case)
        except Exception:
            accepted = False
        if accepted == (case["expected_result"] == "SUCCESS"):
            passed += 1
        else:
            failed += 1
    elapsed = time.perf_counter() - started
    print(f"pyca/cryptography limbo: {passed} passed, {failed} failed, {skipped} skipped; wall time {elapsed:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

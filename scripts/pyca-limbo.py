#!/usr/bin/env python3
"""Runs x509-limbo's SERVER cases through pyca/cryptography's verifier and prints pass/fail and wall time, for
comparing the full-suite run time with `limbo` (see scripts/bench-compare.sh LIMBO=1).

    scripts/pyca-limbo.py [path/to/limbo.json] [seconds per case, default 10]

Cases with CRLs, custom signature-algorithm or key-usage sets are skipped, as the limbo runner skips them.
"""
import datetime
import ipaddress
import json
import multiprocessing
import queue
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


def worker(path, requests, results):
    """Evaluates the cases whose indexes arrive on `requests`; answers (index, accepted, seconds)."""
    with open(path) as handle:
        cases = [c for c in json.load(handle)["testcases"] if c["validation_kind"] == "SERVER"]
    while True:
        index = requests.get()
        if index is None:
            return
        started = time.perf_counter()
        try:
            accepted = run(cases[index])
        except Exception:
            accepted = False
        results.put((index, accepted, time.perf_counter() - started))


def main() -> int:
    path = sys.argv[1] if len(sys.argv) > 1 else "/work/shared/x509-limbo/limbo.json"
    cap = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
    with open(path) as handle:
        cases = [c for c in json.load(handle)["testcases"] if c["validation_kind"] == "SERVER"]
    passed = failed = skipped = 0
    timed_out = []
    verifying = 0.0  # time spent inside the verifier, summed over cases (a timed-out case counts its cap)

    # pyca/cryptography's verifier does not return on at least one pathological case (Rust, holding the GIL, so
    # no signal reaches it): each case runs in a worker process, and a case that overstays `cap` seconds is
    # counted as failed and its worker replaced.
    def start():
        requests, results = multiprocessing.Queue(), multiprocessing.Queue()
        process = multiprocessing.Process(target=worker, args=(path, requests, results), daemon=True)
        process.start()
        return process, requests, results

    process, requests, results = start()
    fresh = True  # a new worker first loads the suite: its first case gets 30 s more
    started = time.perf_counter()
    for index, case in enumerate(cases):
        if case.get("crls") or case.get("signature_algorithms") or case.get("key_usage") or \
                (case.get("extended_key_usage") and case["extended_key_usage"] != ["serverAuth"]):
            skipped += 1
            continue
        requests.put(index)
        try:
            _, accepted, seconds = results.get(timeout=cap + 30 if fresh else cap)
            fresh = False
        except queue.Empty:
            timed_out.append(case["id"])
            process.kill()
            process.join()
            process, requests, results = start()
            fresh = True
            accepted, seconds = False, cap
        verifying += seconds
        if accepted == (case["expected_result"] == "SUCCESS"):
            passed += 1
        else:
            failed += 1
    requests.put(None)
    elapsed = time.perf_counter() - started
    note = f"; {len(timed_out)} case(s) stopped after {cap:g} s: {', '.join(timed_out)}" if timed_out else ""
    print(f"pyca/cryptography limbo: {passed} passed, {failed} failed, {skipped} skipped; wall time {elapsed:.1f} s, "
          f"in the verifier {verifying:.1f} s{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

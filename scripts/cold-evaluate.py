#!/usr/bin/env python3
"""Whole-process `pinning evaluate` against `openssl verify` (issue 31 item 4, the command line's cold path).

    scripts/cold-evaluate.py [--runs 300] [--pki DIR] LABEL=PINNING_BINARY [LABEL=PINNING_BINARY ...]

Mints a P-256 chain with openssl (root, intermediate, leaf for bench.example) into --pki (a new temporary
directory without it), then runs each binary's
`evaluate --chain chain.pem --roots root.pem --host bench.example` and
`openssl verify -CAfile root.pem -untrusted intermediate.pem -verify_hostname bench.example leaf.pem`
--runs times each, interleaved in a shuffled order every round (so every command meets the same load), and
prints the medians of wall time and CPU time (user + system, from wait4) with each binary's ratio to openssl and
the load average before and after. Every run must exit 0 (trusted).
"""
import argparse
import atexit
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def mint(pki):
    def openssl(*arguments):
        subprocess.run(["openssl", *arguments], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    extensions = os.path.join(pki, "ext.cnf")
    with open(extensions, "w") as file:
        file.write(
            "[ca]\nbasicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n"
            "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n"
            "[leaf]\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
            "extendedKeyUsage=serverAuth\nsubjectAltName=DNS:bench.example\n"
            "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n"
        )
    for name in ("root", "int", "leaf"):
        openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", f"{pki}/{name}.key")
    openssl("req", "-new", "-x509", "-key", f"{pki}/root.key", "-subj", "/CN=Bench Root", "-days", "3650",
            "-sha256", "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            "-out", f"{pki}/root.pem")
    openssl("req", "-new", "-key", f"{pki}/int.key", "-subj", "/CN=Bench Intermediate", "-out", f"{pki}/int.csr")
    openssl("x509", "-req", "-in", f"{pki}/int.csr", "-CA", f"{pki}/root.pem", "-CAkey", f"{pki}/root.key",
            "-CAcreateserial", "-days", "1825", "-sha256", "-extfile", extensions, "-extensions", "ca", "-out", f"{pki}/int.pem")
    openssl("req", "-new", "-key", f"{pki}/leaf.key", "-subj", "/CN=bench.example", "-out", f"{pki}/leaf.csr")
    openssl("x509", "-req", "-in", f"{pki}/leaf.csr", "-CA", f"{pki}/int.pem", "-CAkey", f"{pki}/int.key",
            "-CAcreateserial", "-days", "365", "-sha256", "-extfile", extensions, "-extensions", "leaf", "-out", f"{pki}/leaf.pem")
    with open(f"{pki}/chain.pem", "w") as chain:
        for name in ("leaf", "int"):
            with open(f"{pki}/{name}.pem") as part:
                chain.write(part.read())


def run(command):
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"not trusted or failed (exit {os.waitstatus_to_exitcode(status)}): {' '.join(command)}")
    return time.perf_counter() - started, usage.ru_utime + usage.ru_stime


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--pki", help="a directory with the chain (minted there when it has no chain.pem)")
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("binaries", nargs="+", metavar="LABEL=PINNING_BINARY")
    options = parser.parse_args()
    pki = options.pki
    if not pki:
        pki = tempfile.mkdtemp(prefix="cold-evaluate-")
        atexit.register(shutil.rmtree, pki, True)  # ours: removed at exit, a failed run or Ctrl-C included
    os.makedirs(pki, exist_ok=True)
    if not os.path.exists(f"{pki}/chain.pem"):
        mint(pki)
    commands = []
    for item in options.binaries:
        label, _, binary = item.partition("=")
        commands.append((label, [binary, "evaluate", "--chain", f"{pki}/chain.pem", "--roots", f"{pki}/root.pem", "--host", "bench.example"]))
    commands.append(("openssl verify", ["openssl", "verify", "-CAfile", f"{pki}/root.pem", "-untrusted", f"{pki}/int.pem",
                                        "-verify_hostname", "bench.example", f"{pki}/leaf.pem"]))
    for _, command in commands:
        run(command)  # warm the page cache, and check that every command trusts the chain
    wall = {label: [] for label, _ in commands}
    cpu = {label: [] for label, _ in commands}
    generator = random.Random(options.seed)
    load_before = os.getloadavg()[0]
    for _ in range(options.runs):
        order = commands[:]
        generator.shuffle(order)
        for label, command in order:
            seconds, processor = run(command)
            wall[label].append(seconds)
            cpu[label].append(processor)
    load_after = os.getloadavg()[0]
    openssl_wall = statistics.median(wall["openssl verify"])
    openssl_cpu = statistics.median(cpu["openssl verify"])
    for label, _ in commands:
        w, c = statistics.median(wall[label]), statistics.median(cpu[label])
        print(f"{label:30} wall {w * 1000:6.2f} ms  CPU {c * 1000:6.2f} ms   ÷ openssl verify: wall {w / openssl_wall:.2f}×  CPU {c / openssl_cpu:.2f}×")
    print(f"{options.runs} runs of each, interleaved in a shuffled order each round; load average {load_before:.2f} -> {load_after:.2f}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Interleaved ingest runs of several pinning-collector builds, with the CPU each collector used.

    scripts/collector-ingest-ab.py --runs 3 old=/tmp/pinning-collector-main new=.build-release/release/pinning-collector
    scripts/collector-ingest-ab.py --runs 3 --postgres postgres://pinning@127.0.0.1:55433/postgres grouped=BIN 'alone=BIN --commit-batch 1'

Each run starts `BIN bench --phases ingest` (or `postgres`) once per build, in A B then B A order, so that the
machine's changing load falls on every build alike; the load average is printed beside each run. While a bench runs,
its child processes (one collector per phase) are sampled every 50 ms from /proc: a collector's CPU (user + system)
is its last sample before it exits, the bench's own CPU over the collector's life is the HTTP client's share. A
phase's collector serves its warm-up as well as its timed requests (one report per POST: 200 + REPORTS requests;
100 per POST: twice REPORTS reports), so its CPU is divided by that many reports. A PostgreSQL server's own CPU is
not counted. Medians are printed at the end.
"""
import argparse, os, re, shlex, statistics, subprocess, sys, time

TICK = os.sysconf('SC_CLK_TCK')


def stat(pid):
    try:
        with open(f'/proc/{pid}/stat') as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rindex(')') + 2:].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK


def run(command):
    bench = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    children, order = {}, []
    while bench.poll() is None:
        mine = stat(bench.pid)
        if mine:
            for name in os.listdir('/proc'):
                if name.isdigit() and (child := stat(int(name))) and child[0] == bench.pid:
                    pid = int(name)
                    if pid not in children:
                        children[pid] = [mine[1], 0.0, mine[1]]
                        order.append(pid)
                    children[pid][1:] = [child[1], mine[1]]
        time.sleep(0.05)
    lines = [line for line in bench.stdout.read().splitlines() if line.startswith('ingest ')]
    return [(line, children[pid][1], children[pid][2] - children[pid][0]) for line, pid in zip(lines, order)]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--reports', type=int, default=15000)
    parser.add_argument('--postgres', help='measure the PostgreSQL phases against this database instead of SQLite')
    parser.add_argument('builds', nargs='+', help="NAME=BINARY [extra bench options], e.g. 'alone=BIN --commit-batch 1'")
    options = parser.parse_args()
    builds = []
    for spec in options.builds:
        name, _, rest = spec.partition('=')
        words = shlex.split(rest)
        builds.append((name, words[0], words[1:]))
    phase = ['--phases', 'postgres', '--postgres', options.postgres] if options.postgres else ['--phases', 'ingest']
    results = {}
    for number in range(1, options.runs + 1):
        for name, binary, extra in builds if number % 2 else list(reversed(builds)):
            load = open('/proc/loadavg').read().split()[:3]
            print(f"=== {name} run {number} {time.strftime('%H:%M:%S')} load {' '.join(load)}", flush=True)
            for line, cpu, client in run([binary, 'bench', *phase, '--reports', str(options.reports), *extra]):
                label, rate = re.match(r'ingest (.*?): .* = (\d+) reports/s', line).groups()
                reports = options.reports + 200 if 'one report per POST' in label else 2 * options.reports
                print(f'{line}\n    collector CPU {cpu:.2f} s ({cpu * 1e6 / reports:.0f} ms per 1,000 reports), client CPU {client:.2f} s', flush=True)
                results.setdefault((label, name), []).append((int(rate), cpu * 1e6 / reports))
    print(f"=== end {time.strftime('%H:%M:%S')} load {' '.join(open('/proc/loadavg').read().split()[:3])}")
    for (label, name), values in results.items():
        rates, cpus = [rate for rate, _ in values], [cpu for _, cpu in values]
        print(f'{label} | {name} | median {statistics.median(rates):.0f} reports/s {rates} | collector CPU median {statistics.median(cpus):.0f} ms per 1,000 reports {[round(c) for c in cpus]}')


if __name__ == '__main__':
    sys.exit(main())

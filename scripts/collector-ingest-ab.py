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

With --client wrk the builds' collectors are driven by wrk (apt-get install wrk) instead of the bench's own client
(AsyncHTTPClient in the bench process, which spends about five times wrk's CPU per request on the same two cores):

    scripts/collector-ingest-ab.py --client wrk --seconds 15 --runs 3 old=/tmp/pinning-collector-main new=.build-release/release/pinning-collector
    scripts/collector-ingest-ab.py --client wrk --postgres postgres://pinning@127.0.0.1:55433/postgres old=BIN new=BIN

Each run then starts `BIN --listen 127.0.0.1:0 --database …` on a fresh SQLite file (or on the PostgreSQL database,
its report and rollup tables emptied first with psql), posts for 2 s to warm up, then for --seconds with 32
keep-alive connections from one wrk thread, each request a distinct report (and with --batch N, in further runs, N
of them), as the bench's bodies are. The collector's CPU is read from /proc before and after the timed part, wrk's own from its rusage.
"""
import argparse, os, re, resource, shlex, statistics, subprocess, sys, tempfile, time

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


# wrk's request script: distinct reports shaped as the bench's (2,000 hosts, the app version the report's number),
# one per POST or `BATCH` in an array; each wrk thread numbers its own.
WRK_SCRIPT = r"""
local counter, batch, threads = 0, 1, {}
local results = {"pinMismatch", "pinMismatch", "pinMismatch", "hostnameMismatch", "noPathToAnchor"}
function setup(thread) thread:set("id", #threads); table.insert(threads, thread) end
function init(args) counter = 20000000 + id * 10000000; batch = tonumber(args[1] or "1") end
local function one(index)
  return string.format('{"hostname":"h%d.bench.test","port":443,"noted-hostname":"bench.test","validation-result":"%s","app-bundle-id":"com.example.app","app-version":"%d","date-time":"2026-11-26T00:00:00Z","known-pins":["pin-sha256=\\"d6qzRu9zOECb90Uez27xWltNsj0e1Md7GkYYkVoZWmM=\\""]}', index % 2000, results[(index % 5) + 1], index)
end
function request()
  local body
  if batch == 1 then
    counter = counter + 1
    body = one(counter)
  else
    local parts = {}
    for i = 1, batch do counter = counter + 1; parts[i] = one(counter) end
    body = "[" .. table.concat(parts, ",") .. "]"
  end
  return wrk.format("POST", "/reports", {["Content-Type"] = "application/json"}, body)
end
function done(summary, latency, requests)
  io.write(string.format("wrk-result %d %d %d %d\n", summary.requests, summary.duration, summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
"""

TABLES = ['report_pins', 'reports', 'rollup_hours', 'rollup_hosts', 'rollup_sources', 'rollup_host_buckets', 'rollup_host_results',
          'rollup_host_pins', 'rollup_pin_sources']


def cpu(pid):
    return stat(pid)[1]


def wrk_run(binary, extra, database, per_post, seconds, options, directory):
    """One timed wrk run against a collector of `binary`: (label line, reports/s, collector CPU s, wrk CPU s, reports)."""
    if database.startswith('postgres'):
        statement = 'DO $$ BEGIN IF to_regclass(\'reports\') IS NOT NULL THEN TRUNCATE ' + ', '.join(TABLES) + '; END IF; END $$'
        subprocess.run([options.psql, database, '-q', '-c', statement], check=True)
    out = open(os.path.join(directory, 'collector.out'), 'w+')
    collector = subprocess.Popen([binary, '--listen', '127.0.0.1:0', '--database', database, '--token-file', os.path.join(directory, 'token'),
                                  '--rate', '1000000/min', *extra], stdout=out, stderr=subprocess.STDOUT)
    try:
        port = None
        for _ in range(1200):
            out.seek(0)
            found = re.search(r'collector listening on http://127\.0\.0\.1:(\d+)', out.read())
            if found:
                port = found.group(1)
                break
            if collector.poll() is not None:
                break
            time.sleep(0.05)
        if not port:
            out.seek(0)
            sys.exit(f'{binary}: the collector did not start: {out.read()}')
        url = f'http://127.0.0.1:{port}/'
        # wrk's default 2 s timeout is shorter than a queue of 32 batches of 100 takes on a busy machine.
        wrk = ['wrk', '-t1', '-c', str(options.concurrency), '--timeout', '120s', '-s', os.path.join(directory, 'post.lua')]
        subprocess.run([*wrk, '-d2s', url, '--', str(per_post)], check=True, stdout=subprocess.DEVNULL)
        before, children = cpu(collector.pid), resource.getrusage(resource.RUSAGE_CHILDREN)
        text = subprocess.run([*wrk, f'-d{seconds}s', url, '--', str(per_post)], check=True, capture_output=True, text=True).stdout
        after, children_after = cpu(collector.pid), resource.getrusage(resource.RUSAGE_CHILDREN)
    finally:
        collector.terminate()
        collector.wait()
    requests, microseconds, refused, failed = map(int, re.search(r'wrk-result (\d+) (\d+) (\d+) (\d+)', text).groups())
    if requests - refused - failed <= 0:
        sys.exit(f'{binary}: no report was accepted in {seconds} s ({requests} answers, {refused} not 2xx, {failed} socket errors)')
    client = (children_after.ru_utime + children_after.ru_stime) - (children.ru_utime + children.ru_stime)
    reports = (requests - refused - failed) * per_post
    rate = reports / (microseconds / 1e6)
    kind = 'PostgreSQL' if database.startswith('postgres') else 'SQLite'
    label = f'{kind}, one report per POST' if per_post == 1 else f'{kind}, {per_post} reports per POST'
    line = (f'ingest {label} (wrk): {reports} reports in {microseconds / 1e6:.2f} s = {rate:.0f} reports/s '
            f'({requests} requests, {refused} not 2xx, {failed} socket errors)')
    return label, line, rate, after - before, client, reports


def main_wrk(options, builds):
    results = {}
    with tempfile.TemporaryDirectory(prefix='collector-ingest-ab-') as directory:
        with open(os.path.join(directory, 'token'), 'w') as f:
            f.write('bench-token-0123456789abcdef0123')
        with open(os.path.join(directory, 'post.lua'), 'w') as f:
            f.write(WRK_SCRIPT)
        for number in range(1, options.runs + 1):
            for name, binary, extra in builds if number % 2 else list(reversed(builds)):
                load = open('/proc/loadavg').read().split()[:3]
                print(f"=== {name} run {number} {time.strftime('%H:%M:%S')} load {' '.join(load)}", flush=True)
                for per_post in [1] + ([options.batch] if options.batch > 0 else []):
                    database = options.postgres or 'sqlite:' + os.path.join(directory, f'{name}-{number}-{per_post}.db')
                    label, line, rate, collector, client, reports = wrk_run(binary, extra, database, per_post, options.seconds, options, directory)
                    print(f'{line}\n    collector CPU {collector:.2f} s ({collector * 1e6 / reports:.0f} ms per 1,000 reports), '
                          f'wrk CPU {client:.2f} s', flush=True)
                    results.setdefault((label, name), []).append((int(rate), collector * 1e6 / reports))
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--reports', type=int, default=15000)
    parser.add_argument('--postgres', help='measure the PostgreSQL phases against this database instead of SQLite')
    parser.add_argument('--client', choices=['bench', 'wrk'], default='bench', help="the bench's own client, or wrk")
    parser.add_argument('--seconds', type=int, default=15, help='with --client wrk: how long each timed run posts')
    parser.add_argument('--batch', type=int, default=0,
                        help='with --client wrk: also runs with this many reports per POST (0: none; with few, long requests the '
                             'ones in flight when a run starts and ends weigh on its figures, which the bench avoids)')
    parser.add_argument('--concurrency', type=int, default=32, help='with --client wrk: connections')
    parser.add_argument('--psql', default='psql', help='with --client wrk and --postgres: the psql that empties the tables')
    parser.add_argument('builds', nargs='+', help="NAME=BINARY [extra bench options], e.g. 'alone=BIN --commit-batch 1'")
    options = parser.parse_args()
    builds = []
    for spec in options.builds:
        name, _, rest = spec.partition('=')
        words = shlex.split(rest)
        builds.append((name, words[0], words[1:]))
    if options.client == 'wrk':
        print_medians(main_wrk(options, builds))
        return
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
    print_medians(results)


def print_medians(results):
    print(f"=== end {time.strftime('%H:%M:%S')} load {' '.join(open('/proc/loadavg').read().split()[:3])}")
    for (label, name), values in results.items():
        rates, cpus = [rate for rate, _ in values], [cpu for _, cpu in values]
        print(f'{label} | {name} | median {statistics.median(rates):.0f} reports/s {rates} | collector CPU median {statistics.median(cpus):.0f} ms per 1,000 reports {[round(c) for c in cpus]}')


if __name__ == '__main__':
    sys.exit(main())

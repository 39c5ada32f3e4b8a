#!/usr/bin/env python3
"""One wrk run against a fresh collector, with what its ingest writer did:

    scripts/collector-ingest-curve.py BIN sqlite|postgres://… CONNECTIONS SECONDS [PER_POST [collector options…]]
    for c in 32 128 512; do scripts/collector-ingest-curve.py .build-release/release/pinning-collector sqlite $c 10; done

Prints reports/s, the collector's CPU per 1,000 reports and in cores (from /proc), wrk's CPU in cores, the commits
over the timed part (from /metrics: collector_ingest_commits_total) and so the reports per commit and the mean
time between commits (the writer's cycle while its queue is never empty), and the queue's depth sampled every
100 ms (collector_ingest_queue_reports: reports waiting or in the transaction under way). With a median depth
near the connection count every request is waiting for the one writer. The report bodies and the emptying of the
PostgreSQL tables are collector-ingest-ab.py's (beside this file). Needs wrk (apt-get install wrk) and psql for
PostgreSQL."""
import atexit, os, re, resource, shutil, subprocess, sys, tempfile, threading, time, urllib.request
import importlib.util
sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
spec = importlib.util.spec_from_file_location('ab', os.path.join(os.path.dirname(os.path.abspath(__file__)), 'collector-ingest-ab.py')); ab = importlib.util.module_from_spec(spec); spec.loader.exec_module(ab)
binary, database, conns, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
per_post = int(sys.argv[5]) if len(sys.argv) > 5 else 1
extra = sys.argv[6:]
d = tempfile.mkdtemp(prefix='collector-ingest-curve-')
atexit.register(shutil.rmtree, d, True)  # also when a step fails (sys.exit, an exception, Ctrl-C)
open(d + '/token', 'w').write('bench-token-0123456789abcdef0123')
open(d + '/post.lua', 'w').write(ab.WRK_SCRIPT)
if database == 'sqlite':
    database = 'sqlite:' + d + '/db'
else:
    subprocess.run(['psql', database, '-q', '-c', 'DO $$ BEGIN IF to_regclass(\'reports\') IS NOT NULL THEN TRUNCATE ' + ', '.join(ab.TABLES) + '; END IF; END $$'], check=True)
out = open(d + '/out', 'w+')
c = subprocess.Popen(['nice', '-n', '10', binary, '--listen', '127.0.0.1:0', '--database', database, '--token-file', d + '/token', '--rate', '1000000/min', *extra], stdout=out, stderr=subprocess.STDOUT)
port = None
for _ in range(600):
    out.seek(0); m = re.search(r'listening on http://127\.0\.0\.1:(\d+)', out.read())
    if m: port = m.group(1); break
    time.sleep(0.05)
if not port:
    c.kill()
    out.seek(0)
    sys.exit(f'{binary}: the collector did not start: {out.read().strip()}')
url = f'http://127.0.0.1:{port}/'
def metric(name):
    text = urllib.request.urlopen(url + 'metrics').read().decode()
    m = re.search(r'^' + name + r'(?:\{[^}]*\})? ([0-9.e+]+)$', text, re.M)
    return float(m.group(1)) if m else 0.0
wrk = ['nice', '-n', '10', 'wrk', '-t1', '-c', str(conns), '--timeout', '120s', '-s', d + '/post.lua']
subprocess.run([*wrk, '-d2s', url, '--', str(per_post)], check=True, stdout=subprocess.DEVNULL)
time.sleep(0.5)
commits0 = metric('collector_ingest_commits_total') or metric('collector_commits_total')
cpu0 = ab.cpu(c.pid); load = open('/proc/loadavg').read().split()[:3]
depths = []; stop = False
def sample():
    time.sleep(0.5)
    while not stop:
        depths.append(metric('collector_ingest_queue_reports') or metric('collector_ingest_queue')); time.sleep(0.1)
t = threading.Thread(target=sample); t.start()
r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
text = subprocess.run([*wrk, f'-d{seconds}s', url, '--', str(per_post)], check=True, capture_output=True, text=True).stdout
r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
stop = True; t.join()
cpu1 = ab.cpu(c.pid); commits1 = metric('collector_ingest_commits_total') or metric('collector_commits_total')
c.terminate(); c.wait()
req, us, bad, err = map(int, re.search(r'wrk-result (\d+) (\d+) (\d+) (\d+)', text).groups())
reports = (req - bad - err) * per_post; wall = us / 1e6
commits = commits1 - commits0
depths.sort()
print(f'{os.path.basename(binary)} {database.split(":")[0]} c={conns} per_post={per_post}: {reports/wall:.0f} reports/s; collector CPU {(cpu1-cpu0)*1e6/reports:.0f} ms/1000 = {(cpu1-cpu0)/wall:.2f} cores; '
      f'wrk CPU {(r1.ru_utime+r1.ru_stime-r0.ru_utime-r0.ru_stime)/wall:.2f} cores; commits {commits:.0f} = {reports/max(commits,1):.1f} reports/commit, '
      f'cycle {wall*1000/max(commits,1):.2f} ms; queue depth median {depths[len(depths)//2] if depths else -1:.0f} p90 {depths[int(len(depths)*.9)] if depths else -1:.0f}; bad {bad} err {err}; load {" ".join(load)}', flush=True)

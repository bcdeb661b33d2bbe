#!/usr/bin/env python3
"""tokenproxy's reliability figures (issue 12 point 12; docs/RELIABILITY.md, "Figures").

    bench/reliability.py BIN [figure ...]     figures: slowloris idle fds drain memory refused (default: all)

Usually run through bench/reliability.sh, which builds BIN when none is given. Each figure starts
its own upstream (Tests/servers/echo_upstream.py, or framing_upstream.py for `memory`) and its own
tokenproxy on port 0, prints what it measured as `name: value` lines, and stops both. Latencies come
from wrk when installed (else a small Python client) and are only as steady as the machine; counts
and RSS (VmRSS/VmHWM from /proc/PID/status) do not depend on load. Standard library only.
"""
import asyncio
import json
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVERS = os.path.join(ROOT, "Tests", "servers")
TOKEN = "reliability-bench-token"  # a throwaway static token; never a real secret


def say(name, value):
    print(f"{name}: {value}", flush=True)


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


# ------------------------------------------------------------------ processes

class Upstream:
    def __init__(self, script, *args):
        self.proc = subprocess.Popen([sys.executable, os.path.join(SERVERS, script), "--port", "0", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("READY "):
            raise SystemExit(f"{script} did not start")
        self.port = int(line.split()[1])
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


class Nginx:
    """nginx answering 200 "ok" at once on every path: a steadier upstream for latency figures than the
    Python echo server (whose separate small writes meet delayed ACKs: about 50 ms a request)."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="tp-reliability-nginx-")
        with socket.socket() as s:  # a free port (nginx cannot listen on port 0)
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        temp = "".join(f"  {k}_temp_path {self.dir}/{k};\n" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"daemon off;\nworker_processes 1;\npid {self.dir}/nginx.pid;\nerror_log stderr error;\n"
                    f"events {{ worker_connections 4096; }}\nhttp {{\n  access_log off;\n{temp}"
                    f"  keepalive_requests 1000000;\n"
                    f"  server {{ listen 127.0.0.1:{self.port}; location / {{ return 200 \"ok\\n\"; }} }}\n}}\n")
        self.proc = subprocess.Popen(["nginx", "-c", conf, "-p", self.dir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


def latency_upstream():
    """nginx when installed (UPSTREAM=python forces the echo server)."""
    if os.environ.get("UPSTREAM", "nginx") == "nginx" and shutil.which("nginx"):
        return Nginx()
    return Upstream("echo_upstream.py")


class Proxy:
    """`tokenproxy serve` with a configuration in a temporary folder; stderr goes to a file."""

    def __init__(self, binary, upstream_url, extra="", workers=0, admin=True, nofile=None):
        self.dir = tempfile.mkdtemp(prefix="tp-reliability-")
        config = (f"listen: 127.0.0.1:0\nupstream: {upstream_url}\nworkers: {workers}\n"
                  f"credentials:\n  type: static\n  token_env: TP_BENCH_TOKEN\n"
                  f"log:\n  level: info\n")
        if admin:
            config += "admin:\n  listen: 127.0.0.1:0\n"
        config += extra
        self.config = os.path.join(self.dir, "tokenproxy.yaml")
        with open(self.config, "w") as f:
            f.write(config)
        self.log = os.path.join(self.dir, "stderr.log")
        env = dict(os.environ, TP_BENCH_TOKEN=TOKEN)
        argv = [binary, "serve", "--config", self.config]
        if nofile:
            # The shell lowers the descriptor limit, then becomes tokenproxy (same pid).
            argv = ["/bin/sh", "-c", f'ulimit -n {nofile} && exec "$0" serve --config "$1"', binary, self.config]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=open(self.log, "w"), env=env)
        self.pid = self.proc.pid
        deadline = time.time() + 30
        self.port = self.admin_port = None
        while time.time() < deadline:
            text = self.stderr()
            m = re.search(r"(?<!admin )listening on 127\.0\.0\.1:(\d+)", text)
            a = re.search(r"admin listening on 127\.0\.0\.1:(\d+)", text)
            if m and (a or not admin):
                self.port = int(m.group(1))
                self.admin_port = int(a.group(1)) if a else None
                break
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        if self.port is None:
            raise SystemExit("tokenproxy did not start:\n" + self.stderr())
        self.url = f"http://127.0.0.1:{self.port}"

    def stderr(self):
        with open(self.log, errors="replace") as f:
            return f.read()

    def status(self, field):
        """A /proc/PID/status field in KiB (VmRSS, VmHWM)."""
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        return -1

    def metric(self, name):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.admin_port}/metrics", timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[-1])
        return None

    def wait_metric(self, name, want, timeout):
        deadline = time.time() + timeout
        value = None
        while time.time() < deadline:
            value = self.metric(name)
            if value == want:
                break
            time.sleep(0.1)
        return value

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
        return self.proc.returncode


def get(url, timeout=10):
    """(status, seconds) of one GET on a connection of its own."""
    start = time.monotonic()
    try:
        with urllib.request.urlopen(urllib.request.Request(url), timeout=timeout) as r:
            r.read()
            status = r.status
    except urllib.error.HTTPError as e:
        status = e.code
    except Exception as e:  # noqa: BLE001 - the figure reports whatever happened
        status = f"error ({e.__class__.__name__}: {e})"
    return status, time.monotonic() - start


# ------------------------------------------------------------------ a normal client

def latency(url, seconds):
    """A normal client's latency over `seconds`: one keep-alive connection, one request at a time."""
    if shutil.which("wrk"):
        out = subprocess.run(["wrk", "-t1", "-c1", f"-d{seconds}s", "--latency", url],
                             capture_output=True, text=True).stdout
        dist = dict(re.findall(r"^\s+(\d+)%\s+(\S+)$", out, re.M))
        reqs = re.search(r"(\d+) requests in", out)
        errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
        socket_errors = re.search(r"Socket errors: (.*)$", out, re.M)
        return (f"p50 {dist.get('50', '?')} p99 {dist.get('99', '?')} ({reqs.group(1) if reqs else '?'} requests, "
                f"{errors.group(1) if errors else 0} non-2xx{', socket errors ' + socket_errors.group(1) if socket_errors else ''}; wrk -t1 -c1)")
    times, failures = [], 0
    host, port = url.split("//")[1].split("/")[0].split(":")
    end = time.monotonic() + seconds
    import http.client
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    while time.monotonic() < end:
        start = time.monotonic()
        try:
            conn.request("GET", "/" + url.split("/", 3)[3])
            r = conn.getresponse()
            r.read()
            if r.status != 200:
                failures += 1
        except Exception:  # noqa: BLE001
            failures += 1
            conn = http.client.HTTPConnection(host, int(port), timeout=10)
            continue
        times.append(time.monotonic() - start)
    times.sort()
    q = lambda p: f"{times[min(len(times) - 1, int(p * len(times)))] * 1000:.2f}ms" if times else "?"
    return f"p50 {q(0.5)} p99 {q(0.99)} ({len(times)} requests, {failures} failures; python client)"


# ------------------------------------------------------------------ figure 1: slow-loris

async def loris(port, kind, stop, stats, pad):
    """One attacker: connects, sends a blank line (`blank`) or the next byte of a head (`head`) once
    a second, and when the proxy answers or closes, notes how and after how long, then reconnects."""
    head = (f"GET /loris HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Pad: {'a' * pad}\r\n\r\n").encode()
    await asyncio.sleep(hash((kind, id(stats), time.monotonic())) % 1000 / 1000)
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            stats["connect_errors"] += 1
            await asyncio.sleep(0.5)
            continue
        stats["connections"] += 1
        first, i = time.monotonic(), 0
        outcome = None
        while not stop.is_set() and outcome is None:
            try:
                writer.write(b"\r\n" if kind == "blank" else head[i:i + 1])
                i += 1
                await writer.drain()
            except OSError:
                outcome = "closed"
                break
            try:
                data = await asyncio.wait_for(reader.read(4096), 1.0)
            except asyncio.TimeoutError:
                continue
            except OSError:
                outcome = "reset"
                break
            outcome = data.split(b" ", 2)[1].decode(errors="replace") if data else "closed"
        if outcome is not None:
            stats["cut"][outcome] = stats["cut"].get(outcome, 0) + 1
            stats["cut_after"].append(time.monotonic() - first)
        writer.close()


async def slowloris_attack(proxy, per_kind, seconds, normal_seconds):
    stop = asyncio.Event()
    stats = {k: {"connections": 0, "connect_errors": 0, "cut": {}, "cut_after": []} for k in ("blank", "head")}
    tasks = [asyncio.create_task(loris(proxy.port, k, stop, stats[k], 200)) for k in ("blank", "head") for _ in range(per_kind)]
    await asyncio.sleep(4)  # every attacker connected and dripping
    open_during = proxy.metric("tokenproxy_open_connections")
    rss_during = proxy.status("VmRSS")
    normal = await asyncio.to_thread(latency, proxy.url + "/base/normal", normal_seconds)
    await asyncio.sleep(max(0, seconds - 4 - normal_seconds))
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    return stats, open_during, rss_during, normal


def figure_slowloris(binary):
    raise_nofile()
    per_kind = int(os.environ.get("LORIS", "500"))
    up = latency_upstream()
    proxy = Proxy(binary, up.url, "limits:\n  client_header_timeout: 10s\n  client_idle_timeout: 60s\n")
    say("slowloris.setup", f"{per_kind} connections sending a blank line a second + {per_kind} sending a head "
        f"one byte a second; client_header_timeout 10s, client_idle_timeout 60s, workers 0 (one per CPU); upstream {up.__class__.__name__}")
    say("slowloris.normal_without_attack", latency(proxy.url + "/base/normal", 10))
    stats, open_during, rss_during, normal = asyncio.run(slowloris_attack(proxy, per_kind, 30, 15))
    say("slowloris.normal_during_attack", normal)
    say("slowloris.open_connections_during_attack", int(open_during or 0))
    say("slowloris.rss_during_attack_kib", rss_during)
    for kind in ("blank", "head"):
        s = stats[kind]
        after = sorted(s["cut_after"])
        spread = f"{min(after):.1f}-{max(after):.1f}s, median {statistics.median(after):.1f}s" if after else "none"
        say(f"slowloris.{kind}", f"{s['connections']} connections over the run, cut by the proxy: {s['cut']} "
            f"after {spread} (the rest were still dripping when the run ended); connect errors {s['connect_errors']}")
    code = proxy.stop()
    say("slowloris.exit_status", code)
    up.stop()


# ------------------------------------------------------------------ figure 2: idle connections

async def hold(port, count, batch=500):
    conns = []
    for start in range(0, count, batch):
        conns += await asyncio.gather(*[asyncio.open_connection("127.0.0.1", port) for _ in range(min(batch, count - start))])
    return conns


def figure_idle(binary):
    raise_nofile()
    count = int(os.environ.get("IDLE", "10000"))
    up = latency_upstream()
    proxy = Proxy(binary, up.url, f"limits:\n  max_connections: {count + 2000}\n  client_idle_timeout: 5m\n")
    get(proxy.url + "/base/warm")
    say("idle.setup", f"{count} client connections that send nothing; max_connections {count + 2000}, client_idle_timeout 5m; upstream {up.__class__.__name__}")
    say("idle.normal_before", latency(proxy.url + "/base/normal", 10))
    before = proxy.status("VmRSS")
    say("idle.rss_before_kib", before)

    async def run():
        t = time.monotonic()
        conns = await hold(proxy.port, count)
        opened = time.monotonic() - t
        open_now = await asyncio.to_thread(proxy.wait_metric, "tokenproxy_open_connections", count, 30)
        with_them = proxy.status("VmRSS")
        normal = await asyncio.to_thread(latency, proxy.url + "/base/normal", 10)
        for _, w in conns:
            w.close()
        return opened, open_now, with_them, normal

    opened, open_now, with_them, normal = asyncio.run(run())
    say("idle.connected_in_s", f"{opened:.1f}")
    say("idle.open_connections_metric", int(open_now or 0))
    say("idle.rss_with_them_kib", with_them)
    say("idle.rss_per_connection_kib", f"{(with_them - before) / count:.2f}")
    say("idle.normal_with_them", normal)
    say("idle.open_connections_after_close", int(proxy.wait_metric("tokenproxy_open_connections", 0, 30) or 0))
    say("idle.rss_after_close_kib", proxy.status("VmRSS"))
    say("idle.exit_status", proxy.stop())
    up.stop()


# ------------------------------------------------------------------ figure 3: descriptor exhaustion

async def exhaust(port, count):
    async def one(i):
        try:
            r, w = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            return "connect failed", None
        w.write(f"GET /base/fd/{i} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        try:
            data = await asyncio.wait_for(r.read(4096), 5)
            if not data:
                return "closed", w
            code = re.search(rb'"error":"([a-z_]+)"', data)
            return "answered " + data.split(b" ", 2)[1].decode() + (" " + code.group(1).decode() if code else ""), w
        except asyncio.TimeoutError:
            return "no answer in 5 s", w
        except OSError:
            return "reset", w

    results = await asyncio.gather(*[one(i) for i in range(count)])
    outcomes = {}
    for outcome, _ in results:
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    await asyncio.sleep(1)
    for _, w in results:
        if w:
            w.close()
    return outcomes


def figure_fds(binary):
    raise_nofile()
    count = int(os.environ.get("FD_CONNECTIONS", "400"))
    up = Upstream("echo_upstream.py")
    proxy = Proxy(binary, up.url, "", workers=1, admin=False, nofile=256)
    say("fds.setup", f"tokenproxy under `ulimit -n 256`, workers 1; {count} connections at once, each sending a GET")
    outcomes = asyncio.run(exhaust(proxy.port, count))
    say("fds.outcomes", outcomes)
    closed_at = time.monotonic()
    time.sleep(0.5)
    status, took = get(proxy.url + "/base/after", timeout=20)
    say("fds.request_after_closing", f"{status} in {took * 1000:.0f} ms ({time.monotonic() - closed_at:.1f} s after the clients closed)")
    time.sleep(1.5)
    log = proxy.stderr().splitlines()
    lines = [l for l in log if "accept" in l]
    say("fds.log_lines", f"{len(log)} in all, {len(lines)} about accepting")
    for line in lines[:4]:
        say("fds.log", re.sub(r"^\S+\s+", "", line)[:240])
    others = [l for l in log if "accept" not in l and "listening" not in l]
    for line in others[:3]:
        say("fds.log_other", re.sub(r"^\S+\s+", "", line)[:240])
    say("fds.exit_status", proxy.stop())
    up.stop()


# ------------------------------------------------------------------ figure 4: drain

def figure_drain(binary):
    inflight = int(os.environ.get("INFLIGHT", "20"))
    up = Upstream("echo_upstream.py")
    proxy = Proxy(binary, up.url, "drain_timeout: 30s\n")
    say("drain.setup", f"{inflight} requests in flight (the upstream answers each after 3 s), then SIGTERM; drain_timeout 30s")
    socks = []
    for i in range(inflight):
        s = socket.create_connection(("127.0.0.1", proxy.port))
        s.sendall(f"GET /base/slow-head?ms=3000 HTTP/1.1\r\nHost: 127.0.0.1:{proxy.port}\r\n\r\n".encode())
        socks.append(s)
    deadline = time.time() + 20
    while time.time() < deadline:
        with urllib.request.urlopen(up.url + "/count?path=/base/slow-head") as r:
            if json.load(r)["count"] >= inflight:
                break
        time.sleep(0.02)
    sent = time.monotonic()
    proxy.proc.send_signal(signal.SIGTERM)
    while "draining" not in proxy.stderr() and time.monotonic() - sent < 10:
        time.sleep(0.01)
    # A client connecting now: refused, or answered 503, at once; never left waiting.
    late_start = time.monotonic()
    try:
        s = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
        s.settimeout(5)
        s.sendall(f"GET /base/late HTTP/1.1\r\nHost: 127.0.0.1:{proxy.port}\r\n\r\n".encode())
        data = s.recv(4096)
        late = ("answered " + data.split(b" ", 2)[1].decode()) if data else "closed"
    except ConnectionRefusedError:
        late = "refused"
    except socket.timeout:
        late = "hung (no answer in 5 s)"
    except OSError as e:
        late = f"{e.__class__.__name__}"
    say("drain.late_client", f"{late} after {(time.monotonic() - late_start) * 1000:.1f} ms")
    answered = {}
    for s in socks:
        s.settimeout(15)
        try:
            data = s.recv(4096)
            k = data.split(b" ", 2)[1].decode() if data else "closed"
        except OSError as e:
            k = e.__class__.__name__
        answered[k] = answered.get(k, 0) + 1
        s.close()
    say("drain.in_flight_answers", answered)
    code = proxy.proc.wait(40)
    say("drain.exit_status", code)
    say("drain.sigterm_to_exit_s", f"{time.monotonic() - sent:.2f}")
    for line in proxy.stderr().splitlines():
        if "drain" in line or "stopped" in line:
            say("drain.log", re.sub(r"^\S+\s+", "", line)[:240])
    proxy.stop()
    up.stop()


# ------------------------------------------------------------------ figure 5: memory

def figure_memory(binary):
    size = int(os.environ.get("MEMORY_BYTES", "1000000000"))
    up = Upstream("framing_upstream.py")
    proxy = Proxy(binary, up.url + "/f", "", workers=1, admin=False)
    say("memory.setup", f"{size} bytes each way through one connection, workers 1; upstream reads uploads at 50 MB/s; "
        "curl reads the download at 20 MiB/s (--limit-rate 20M)")
    # Warm up: a small upload and download.
    subprocess.run(["curl", "-s", "-o", "/dev/null", "--data-binary", "@-", proxy.url + "/sink"], input=b"x" * 262144)
    subprocess.run(["curl", "-s", "-o", "/dev/null", proxy.url + "/source?bytes=1048576"])
    block = os.urandom(1 << 20)

    def upload(chunked):
        hwm, rss = proxy.status("VmHWM"), proxy.status("VmRSS")
        start = time.monotonic()
        s = socket.create_connection(("127.0.0.1", proxy.port))
        framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {size}"
        s.sendall(f"POST /sink?rate=50000000 HTTP/1.1\r\nHost: 127.0.0.1:{proxy.port}\r\n{framing}\r\n\r\n".encode())
        left = size
        while left:
            piece = block[:min(left, len(block))]
            s.sendall((b"%x\r\n" % len(piece) + piece + b"\r\n") if chunked else piece)
            left -= len(piece)
        if chunked:
            s.sendall(b"0\r\n\r\n")
        s.settimeout(120)
        reply = s.recv(4096)
        s.close()
        got = re.search(rb'"body_len": ?(\d+)', reply)
        answer = reply.split(b"\r\n", 1)[0].decode() + f", upstream got {got.group(1).decode() if got else '?'} bytes"
        name = "chunked" if chunked else "content_length"
        say(f"memory.upload_{name}", f"{answer}; {time.monotonic() - start:.1f} s; VmHWM {hwm} -> {proxy.status('VmHWM')} KiB "
            f"(+{max(0, proxy.status('VmHWM') - hwm) / 1024:.1f} MiB); VmRSS {rss} -> {proxy.status('VmRSS')} KiB")

    upload(True)
    upload(False)
    hwm, rss = proxy.status("VmHWM"), proxy.status("VmRSS")
    start = time.monotonic()
    out = subprocess.run(["curl", "-s", "--limit-rate", "20M", "-o", "/dev/null", "-w", "%{http_code} %{size_download}",
                          proxy.url + f"/source?bytes={size}"], capture_output=True, text=True).stdout
    say("memory.download", f"{out}; {time.monotonic() - start:.1f} s; VmHWM {hwm} -> {proxy.status('VmHWM')} KiB "
        f"(+{max(0, proxy.status('VmHWM') - hwm) / 1024:.1f} MiB); VmRSS {rss} -> {proxy.status('VmRSS')} KiB")
    say("memory.exit_status", proxy.stop())
    up.stop()


# ------------------------------------------------------------------ figure 6: refused connections

async def refused_client(port, hold_seconds, outcomes):
    """One client turned away: reads the answer, then keeps its socket open past the proxy's 2 s
    lingering close (docs/RELIABILITY.md, "Refused connections"), then closes it."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        outcomes["connect failed"] = outcomes.get("connect failed", 0) + 1
        return
    writer.write(b"GET /base/refused HTTP/1.1\r\nHost: x\r\n\r\n")
    try:
        data = await asyncio.wait_for(reader.read(4096), 10)
        status = data.split(b" ", 2)[1].decode(errors="replace") if data else "closed"
    except (asyncio.TimeoutError, OSError):
        status = "no answer"
    outcomes[status] = outcomes.get(status, 0) + 1
    await asyncio.sleep(hold_seconds)
    writer.close()


async def refuse_many(proxy, count, rate, hold_seconds, checkpoints):
    """`count` refused clients, `rate` a second; VmRSS at each checkpoint (refused so far)."""
    outcomes, rss, tasks = {}, [], []
    start = time.monotonic()
    for i in range(count):
        delay = start + i / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(refused_client(proxy.port, hold_seconds, outcomes)))
        if i + 1 in checkpoints:
            rss.append((i + 1, proxy.status("VmRSS")))
    await asyncio.gather(*tasks)
    return outcomes, rss


def figure_refused(binary):
    raise_nofile()
    count = int(os.environ.get("REFUSED", "20000"))
    rate = float(os.environ.get("REFUSED_RATE", "200"))
    full = 50
    up = Upstream("echo_upstream.py")
    # Two loops (two acceptors): at 200 a second, about 400 refused connections linger at once, under
    # the 2 × 256 that may linger (FixedLimits.maxLingeringRefused); past that they would be closed at
    # once, without the timer this figure is about.
    proxy = Proxy(binary, up.url, f"limits:\n  max_connections: {full}\n  client_idle_timeout: 1h\n", workers=2)
    say("refused.setup", f"max_connections {full}, held by {full} idle clients; then {count} clients at {rate:g}/s, "
        f"each refused with 503, holding its socket 2.5 s (past the 2 s linger); workers 2")

    async def run():
        held = await hold(proxy.port, full)
        await asyncio.to_thread(proxy.wait_metric, "tokenproxy_open_connections", full, 30)
        # A first round lets the allocator and the loops' tables reach their working size.
        warm = int(rate * 5)
        await refuse_many(proxy, warm, rate, 2.5, set())
        before = proxy.status("VmRSS")
        step = max(1, count // 4)
        outcomes, rss = await refuse_many(proxy, count, rate, 2.5, set(range(step, count + 1, step)))
        await asyncio.sleep(1)
        after = proxy.status("VmRSS")
        for _, w in held:
            w.close()
        return warm, before, outcomes, rss, after

    warm, before, outcomes, rss, after = asyncio.run(run())
    say("refused.warm_up", f"{warm} refused first")
    say("refused.answers", outcomes)
    say("refused.rss_before_kib", before)
    for done, value in rss:
        say(f"refused.rss_after_{done}_kib", f"{value} (+{value - before})")
    say("refused.rss_after_all_kib", f"{after} (+{after - before}, {(after - before) * 1024 / count:.1f} bytes per refused connection)")
    say("refused.exit_status", proxy.stop())
    up.stop()


FIGURES = {"slowloris": figure_slowloris, "idle": figure_idle, "fds": figure_fds, "drain": figure_drain, "memory": figure_memory,
           "refused": figure_refused}

if __name__ == "__main__":
    if len(sys.argv) < 2 or not os.access(sys.argv[1], os.X_OK):
        raise SystemExit(__doc__)
    for name in sys.argv[2:] or list(FIGURES):
        if name not in FIGURES:
            raise SystemExit(f"unknown figure {name}; figures: {' '.join(FIGURES)}")
        say("figure", f"{name} ({time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs)")
        FIGURES[name](sys.argv[1])

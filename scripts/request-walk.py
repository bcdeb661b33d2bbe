"""The measuring half of scripts/request-walk.sh (how it counts is said there): runs tokenproxy under
callgrind for each request, then prints the files of Sources/ that the request's functions live in."""

import argparse
import glob
import http.server
import json
import os
import re
import signal
import socket
import socketserver
import ssl
import subprocess
import sys
import threading
import time

TOKEN = "walk-token-123"
HOST = "api.example.test"
# The loop's periodic timers: they may fire while the window is open, but serve no request. (A
# private function demangles as `Server.(sweeper in _HASH)`.)
PERIODIC = re.compile(r"ProxyCore\.Server\.\(?(sweeper|watchCertificates)[ (]")
ROOT_FUNCTION = "Sockets.EventLoop.run("


class Upstream(http.server.BaseHTTPRequestHandler):
    """A keep-alive HTTP/1.1 upstream that answers every GET with a small fixed body."""

    protocol_version = "HTTP/1.1"

    def do_GET(self):
        body = b"walk\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class ThreadingServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def symbol_files(root, bin_dir):
    """Maps each text symbol of the build's objects to the set of Sources/ files whose object defines it."""
    objects = {}
    for mapping in glob.glob(os.path.join(bin_dir, "*.build", "output-file-map.json")):
        with open(mapping) as f:
            entries = json.load(f)
        for source, outputs in entries.items():
            if source.startswith(os.path.join(root, "Sources") + os.sep) and "object" in outputs:
                objects[outputs["object"]] = os.path.relpath(source, os.path.join(root, "Sources"))
    for obj in glob.glob(os.path.join(bin_dir, "*.build", "*.c.o")):  # the C targets' own files
        module = os.path.basename(os.path.dirname(obj))[: -len(".build")]
        name = os.path.basename(obj)[: -len(".o")]
        found = glob.glob(os.path.join(root, "Sources", module, "**", name), recursive=True)
        if len(found) == 1:
            objects[obj] = os.path.relpath(found[0], os.path.join(root, "Sources"))
    files = {}
    paths = [p for p in objects if os.path.exists(p)]
    for start in range(0, len(paths), 200):
        batch = paths[start : start + 200]
        out = subprocess.run(["nm", "-A", "--defined-only", *batch], check=True, capture_output=True, text=True).stdout
        for line in out.splitlines():
            obj, _, rest = line.partition(":")
            parts = rest.split()
            if len(parts) == 3 and parts[1] in "TtWw":
                files.setdefault(parts[2], set()).add(objects[obj])
    return files


def parse_callgrind(path):
    """The functions that ran (fn with cost) and the call arcs between them, by raw symbol name."""
    names = {}
    ran, arcs = set(), set()
    current, callee, after_call = None, None, False

    def name(spec):
        spec = spec.strip()
        if spec.startswith("("):
            key, _, rest = spec.partition(")")
            rest = rest.strip()
            if rest:
                names[key] = rest
            return names.get(key, key)
        return spec

    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("fn="):
                current = name(line[3:])
                after_call = False
            elif line.startswith("cfn="):
                callee = name(line[4:])
            elif line.startswith("calls="):
                if current is not None and callee is not None:
                    arcs.add((current, callee))
                    ran.add(callee)
                after_call = True
            elif line[:1].isdigit() or line[:1] in "+-*":
                if after_call:
                    after_call = False  # the call's inclusive cost, not the caller's own
                elif current is not None:
                    ran.add(current)
    return ran, arcs


def demangle(symbols):
    text = "\n".join(symbols) + "\n"
    out = subprocess.run(["swift", "demangle"], input=text, check=True, capture_output=True, text=True).stdout
    lines = out.split("\n")
    return dict(zip(symbols, lines))


def read_response(sock):
    """Reads one response with a Content-Length; returns its status line."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("connection closed before the response head: %r" % data)
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = 0
    for field in lines[1:]:
        key, _, value = field.partition(":")
        if key.strip().lower() == "content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("connection closed in the body")
        body += chunk
    return lines[0]


def wait_for_line(path, text, process, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if process.poll() is not None:
            break
        with open(path, errors="replace") as f:
            for line in f:
                if text in line:
                    return line
        time.sleep(0.2)
    with open(path, errors="replace") as f:
        log = f.read()[-3000:]
    raise RuntimeError("tokenproxy did not log %r within %d s:\n%s" % (text, seconds, log))


def measure(name, args, config, client):
    """Runs tokenproxy with `config` under callgrind; `client(port, toggle)` sends the requests and
    calls toggle("on") / toggle("off") around the measured one. Returns the loop thread's profile."""
    work = args.work
    config_path = os.path.join(work, name + ".yaml")
    with open(config_path, "w") as f:
        f.write(config)
    env = dict(os.environ, WALK_TOKEN=TOKEN)
    if name == "tunnel":
        ca = subprocess.run(
            [os.path.join(args.bin_dir, "tokenproxy"), "ca", "--config", config_path], env=env, capture_output=True, text=True, timeout=120
        )
        if ca.returncode != 0:
            raise RuntimeError("tokenproxy ca: %s" % ca.stderr)
        with open(os.path.join(work, "ca.pem"), "w") as f:
            f.write(ca.stdout)
    out = os.path.join(work, name + ".cg")
    prefix = os.path.join(work, "vgdb-" + name)
    log_path = os.path.join(work, name + ".log")
    command = [
        "valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes", "--demangle=no",
        "--vgdb-prefix=" + prefix, "--callgrind-out-file=" + out, args.binary, "serve", "--config", config_path,
    ]  # fmt: skip
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=work)
    try:
        line = wait_for_line(log_path, "listening on 127.0.0.1:", process, 600)
        port = int(line.rsplit(":", 1)[1].split()[0])

        def toggle(state):
            subprocess.run(
                ["callgrind_control", "--vgdb-prefix=" + prefix, "-i", state, str(process.pid)],
                check=True, capture_output=True, timeout=120,
            )  # fmt: skip

        client(port, toggle)
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    profiles = sorted(glob.glob(out + "-*"))
    if not profiles:
        raise RuntimeError("callgrind wrote no profile (%s)" % log_path)
    return profiles


def plain_client(port, toggle):
    sock = socket.create_connection(("127.0.0.1", port), timeout=120)
    request = b"GET /api/walk HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    sock.sendall(request)
    status = read_response(sock)
    assert " 200 " in status, status
    time.sleep(1)  # the warm-up's tail (the upstream connection back to the pool) is over
    toggle("on")
    sock.sendall(request)
    status = read_response(sock)
    assert " 200 " in status, status
    time.sleep(1)  # the measured request's own tail
    toggle("off")
    sock.close()


def tunnel_client(ca_file):
    def client(port, toggle):
        raw = socket.create_connection(("127.0.0.1", port), timeout=120)
        raw.sendall(b"CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (HOST.encode(), HOST.encode()))
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = raw.recv(1)
            if not chunk:
                raise RuntimeError("no answer to CONNECT")
            data += chunk
        assert b" 200 " in data.split(b"\r\n")[0], data
        context = ssl.create_default_context(cafile=ca_file)
        sock = context.wrap_socket(raw, server_hostname=HOST)
        request = b"GET /walk HTTP/1.1\r\nHost: %s\r\n\r\n" % HOST.encode()
        sock.sendall(request)
        status = read_response(sock)
        assert " 200 " in status, status
        time.sleep(1)
        toggle("on")
        sock.sendall(request)
        status = read_response(sock)
        assert " 200 " in status, status
        time.sleep(1)
        toggle("off")
        sock.close()

    return client


def walk(profiles, symbols):
    """The Sources/ files of the loop thread's functions that `EventLoop.run` reaches, without the
    periodic timers' subtrees; also the functions by file."""
    for profile in profiles:
        ran, arcs = parse_callgrind(profile)
        ours = sorted(s for s in ran if s in symbols)
        readable = demangle(ours)
        roots = [s for s in ours if readable[s].startswith(ROOT_FUNCTION)]
        if roots:
            break
    else:
        raise RuntimeError("no profile has EventLoop.run: the window caught nothing on the loop thread")
    callees = {}
    for caller, callee in arcs:
        callees.setdefault(caller, set()).add(callee)
    periodic = set()
    for s in ran:
        if s in readable and PERIODIC.search(readable[s]):
            periodic.add(s)
    seen, stack = set(roots), list(roots)
    while stack:
        for callee in callees.get(stack.pop(), ()):
            if callee not in seen and callee not in periodic:
                seen.add(callee)
                stack.append(callee)
    by_file, shared = {}, []
    for s in seen:
        files = symbols.get(s)
        if files and readable.get(s, s).startswith("Swift."):
            # The standard library's own code, emitted into the object of whichever file used it
            # (a non-inlined generic or String helper): it names no file of ours, as a helper
            # several objects define names none.
            shared.append("%s  [%s]" % (readable.get(s, s), ", ".join(sorted(files))))
        elif files and len(files) == 1:
            by_file.setdefault(next(iter(files)), []).append(readable.get(s, s))
        elif files:
            shared.append("%s  [%s]" % (readable.get(s, s), ", ".join(sorted(files))))
    return by_file, shared


def report(title, walked, verbose):
    by_file, shared = walked
    modules = sorted({path.split(os.sep)[0] for path in by_file})
    print("%s: %d files in %d modules (%s)" % (title, len(by_file), len(modules), ", ".join(modules)))
    for path in sorted(by_file):
        print("  " + path)
        if verbose:
            for function in sorted(by_file[path]):
                print("      " + function[:160])
    if verbose and shared:
        print("  not counted, the standard library's or defined in several files:")
        for function in sorted(shared):
            print("      " + function[:200])
    print()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--binary", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()

    upstream = ThreadingServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    upstream_url = "http://127.0.0.1:%d/base" % upstream.server_address[1]
    symbols = symbol_files(args.root, args.bin_dir)

    plain = f"""listen: 127.0.0.1:0
workers: 1
drain_timeout: 1s
store:
  path: {args.work}/plain-state/tokens.json
routes:
  - name: api
    match: {{path_prefix: /api/}}
    upstream: {upstream_url}
    credentials: {{type: static, token_env: WALK_TOKEN}}
"""
    tunnel = f"""listen: 127.0.0.1:0
workers: 1
drain_timeout: 1s
store:
  path: {args.work}/tunnel-state/tokens.json
forward_proxy:
  other_hosts: refuse
routes:
  - name: api
    match: {{host: {HOST}}}
    upstream: {upstream_url}
    credentials: {{type: static, token_env: WALK_TOKEN}}
"""
    results = [
        ("plain keep-alive GET through a route (bearer token)", measure("plain", args, plain, plain_client)),
        (
            "GET in a CONNECT tunnel (forward proxy, intercepted)",
            measure("tunnel", args, tunnel, tunnel_client(os.path.join(args.work, "ca.pem"))),
        ),
    ]
    upstream.shutdown()
    for title, profiles in results:
        report(title, walk(profiles, symbols), args.verbose)


if __name__ == "__main__":
    try:
        main()
    except Exception as error:  # one line, not a traceback, for a run that could not measure
        print("request-walk: %s" % error, file=sys.stderr)
        sys.exit(1)

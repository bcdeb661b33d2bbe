#!/usr/bin/env python3
"""A stdlib-only HTTP/1.1 upstream for tokenproxy's end-to-end tests.

Run with `--port 0`; it prints `READY <port>` on stdout once listening and nothing more on stdout.
Every method is accepted on every path. Endpoints (matched on the path's last segments, so they
work under any base path, e.g. `/base/big`):

  anything else        200 JSON {"method", "path" (raw target), "headers" [[name, value], ...] in
                       order, "body_len", "body_sha256", "body" (when < 64 KiB)}; bodies are read
                       with Content-Length or chunked
  /status/N            status N with a small JSON body (204 and 304 without body); with
                       ?retry_after=S, a `Retry-After: S` field
  /big?bytes=N         N bytes of a repeating pattern, with Content-Length
  /stream?bytes=N      the same, chunked
  /redirect?to=URL     302 with Location: URL
  /redirect-slash      301 to the same path with a "/" appended and the same query, as a framework
                       that appends slashes does (Location path-absolute; ?absolute=1: an absolute
                       URL on the request's Host)
  /target-header       200 with the raw request target in an `X-Request-Target` field
  /slow-head?ms=N      answers after N ms
  /slow-stats          {"slow_heads": requests /slow-head has had, "max_in_flight": the most it
                       held at once}
  /stall-body          sends the head and 1000 of 100000 bytes, then hangs (?ms=N to end sooner)
  /garbage             writes bytes that are not HTTP and closes
  /close               closes without answering
  /auth?token=T        200 when Authorization is `Bearer T`, else 401
  /count[?path=P]      how many requests each path (as received) has had
  /connections         how many connections it has accepted (with TLS: handshakes completed)
  CONNECT host:port    acts as the forward proxy of a tunnel that ends here: answers 200, then
                       serves the requests that come through it itself, adding "tunnel" (the
                       CONNECT target) and "tunnel_headers" (the CONNECT request's fields) to echoes
"""
import argparse
import hashlib
import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from serving import announce_and_serve, serve_tls

PATTERN = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ\n"
WRITE_CHUNK = 16 * 1024
BODY_ECHO_LIMIT = 64 * 1024

_count_lock = threading.Lock()
_counts = {}
_connections = 0
_slow = {"in_flight": 0, "max_in_flight": 0, "slow_heads": 0}
VERBOSE = False


def pattern_bytes(offset, length):
    """`length` bytes of the repeating pattern, starting at absolute `offset`."""
    start = offset % len(PATTERN)
    reps = (start + length) // len(PATTERN) + 1
    return (PATTERN * reps)[start:start + length]


ENDPOINTS = {
    "big", "stream", "redirect", "redirect-slash", "target-header", "slow-head", "slow-stats", "stall-body", "garbage", "close", "auth", "count",
    "connections",
}


def route(path):
    """The endpoint a path names, wherever it sits under a base path: `/base/big` is `/big` and
    `/v1/status/404` is `/status/404`, so the proxy's upstream base path does not get in the way.
    Anything else is echoed."""
    segments = path.split("/")
    if len(segments) >= 2 and segments[-1] in ENDPOINTS:
        return "/" + segments[-1]
    if len(segments) >= 3 and segments[-2] == "status" and segments[-1].isdigit():
        return "/status/" + segments[-1]
    return path


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def version_string(self):
        return "echo-upstream"

    def log_message(self, fmt, *args):  # quiet unless --verbose; never stdout
        if VERBOSE:
            sys.stderr.write("echo_upstream: " + (fmt % args) + "\n")

    # The raw request target as it was received: http.server may rewrite self.path (it collapses a
    # leading "//"), and the tests must see exactly what the proxy sent.
    def raw_target(self):
        line = self.raw_requestline.decode("iso-8859-1").rstrip("\r\n")
        parts = line.split(" ")
        return parts[1] if len(parts) >= 2 else self.path

    def read_body(self):
        te = self.headers.get("Transfer-Encoding")
        if te is not None and te.strip().lower() == "chunked":
            body = bytearray()
            while True:
                size_line = self.rfile.readline(65537)
                if not size_line:
                    raise ConnectionError("eof in chunk size")
                size = int(size_line.split(b";", 1)[0].strip(), 16)
                if size == 0:
                    # trailers until an empty line
                    while True:
                        line = self.rfile.readline(65537)
                        if line in (b"\r\n", b"\n", b""):
                            break
                    return bytes(body)
                body += self.rfile.read(size)
                self.rfile.readline(3)  # CRLF after the chunk
        length = self.headers.get("Content-Length")
        if length:
            return self.rfile.read(int(length))
        return b""

    def send_json(self, status, obj, extra_headers=()):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for name, value in extra_headers:
            self.send_header(name, value)
        if self.command == "HEAD" or status in (204, 304) or 100 <= status < 200:
            if status not in (204, 304) and not 100 <= status < 200:
                self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            return
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def handle_any(self):
        try:
            body = self.read_body()
        except (ConnectionError, ValueError):
            self.close_connection = True
            return
        target = self.raw_target()
        split = urlsplit(target)
        path = split.path
        query = parse_qs(split.query)
        with _count_lock:
            _counts[path] = _counts.get(path, 0) + 1
        path = route(path)

        def qint(name, default):
            try:
                return int(query.get(name, [default])[0])
            except ValueError:
                return default

        if path.startswith("/status/"):
            try:
                status = int(path[len("/status/"):].split("/")[0])
            except ValueError:
                status = 400
            if status in (204, 304):
                self.send_response(status)
                self.end_headers()
                return
            retry_after = query.get("retry_after")
            self.send_json(status, {"status": status}, [("Retry-After", retry_after[0])] if retry_after else [])
            return
        if path == "/big" or path == "/stream":
            total = qint("bytes", 0)
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            chunked = path == "/stream"
            if chunked:
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.send_header("Content-Length", str(total))
            self.end_headers()
            if self.command == "HEAD":
                return
            sent = 0
            while sent < total:
                n = min(WRITE_CHUNK, total - sent)
                piece = pattern_bytes(sent, n)
                if chunked:
                    self.wfile.write(b"%x\r\n" % n + piece + b"\r\n")
                else:
                    self.wfile.write(piece)
                sent += n
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
            return
        if path == "/redirect":
            to = query.get("to", ["/"])[0]
            self.send_json(302, {"location": to}, [("Location", to)])
            return
        if path == "/redirect-slash":
            target = self.raw_target()
            target_path, _, target_query = target.partition("?")
            to = target_path + "/" + ("?" + target_query if target_query else "")
            if query.get("absolute") == ["1"]:
                to = "http://" + self.headers.get("Host", "") + to
            self.send_json(301, {"redirected": True}, [("Location", to)])
            return
        if path == "/target-header":
            self.send_json(200, {"echoed": True}, [("X-Request-Target", self.raw_target())])
            return
        if path == "/slow-head":
            with _count_lock:
                _slow["in_flight"] += 1
                _slow["slow_heads"] += 1
                _slow["max_in_flight"] = max(_slow["max_in_flight"], _slow["in_flight"])
            try:
                time.sleep(qint("ms", 1000) / 1000.0)
            finally:
                with _count_lock:
                    _slow["in_flight"] -= 1
            self.send_json(200, {"slept_ms": qint("ms", 1000)})
            return
        if path == "/slow-stats":
            with _count_lock:
                stats = {"slow_heads": _slow["slow_heads"], "max_in_flight": _slow["max_in_flight"]}
            self.send_json(200, stats)
            return
        if path == "/stall-body":
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", "100000")
            self.end_headers()
            self.wfile.write(pattern_bytes(0, 1000))
            self.wfile.flush()
            time.sleep(qint("ms", 600000) / 1000.0)
            self.close_connection = True
            return
        if path == "/garbage":
            self.wfile.write(b"this is not HTTP at all\r\n\x00\x01\x02\r\n\r\n")
            self.wfile.flush()
            self.close_connection = True
            return
        if path == "/close":
            self.close_connection = True
            return
        if path == "/auth":
            token = query.get("token", [""])[0]
            if self.headers.get("Authorization") == "Bearer " + token:
                self.send_json(200, {"auth": "ok"})
            else:
                self.send_json(401, {"auth": "refused"}, [("WWW-Authenticate", 'Bearer realm="echo"')])
            return
        if path == "/connections":
            with _count_lock:
                accepted = _connections
            self.send_json(200, {"connections": accepted})
            return
        if path == "/count":
            key = query.get("path", [None])[0]
            with _count_lock:
                counts = dict(_counts)
            if key is not None:
                self.send_json(200, {"path": key, "count": counts.get(key, 0)})
            else:
                self.send_json(200, {"counts": counts})
            return

        result = {
            "method": self.command,
            "path": target,
            "headers": [[name, value] for name, value in self.headers.items()],
            "body_len": len(body),
            "body_sha256": hashlib.sha256(body).hexdigest(),
        }
        if len(body) < BODY_ECHO_LIMIT:
            result["body"] = body.decode("utf-8", errors="replace")
        tunnel = getattr(self, "tunnel", None)
        if tunnel is not None:
            result["tunnel"] = tunnel
            result["tunnel_headers"] = self.tunnel_headers
        self.send_json(200, result)

    def do_CONNECT(self):
        self.tunnel = self.raw_target()
        self.tunnel_headers = [[name, value] for name, value in self.headers.items()]
        self.send_response(200, "Connection established")
        self.end_headers()

    def __getattr__(self, name):
        # Any method (GET, POST, PATCH, PROPFIND, ...) goes to the same handler.
        if name.startswith("do_"):
            return self.handle_any
        raise AttributeError(name)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def get_request(self):
        # With TLS the listening socket's accept completes the handshake: a failed one is not counted.
        request = super().get_request()
        global _connections
        with _count_lock:
            _connections += 1
        return request

    def handle_error(self, request, client_address):  # a client that went away is no news
        if VERBOSE:
            super().handle_error(request, client_address)


def main():
    global VERBOSE
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--verbose", action="store_true", help="log each request on stderr")
    parser.add_argument("--tls-cert", help="serve HTTPS with this certificate chain (PEM)")
    parser.add_argument("--tls-key", help="the certificate's private key (PEM)")
    parser.add_argument("--tls-client-ca", help="require a client certificate signed by this CA (mTLS)")
    args = parser.parse_args()
    VERBOSE = args.verbose
    if ":" in args.host:
        Server.address_family = socket.AF_INET6
    server = Server((args.host, args.port), Handler)
    if args.tls_cert:
        serve_tls(server, args.tls_cert, args.tls_key, args.tls_client_ca)
    announce_and_serve(server)


if __name__ == "__main__":
    main()

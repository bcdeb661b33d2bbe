#!/usr/bin/env python3
"""A backend with its own JSON login and refresh calls, for the JSONRefreshProvider tests.
Standard library only.

    json_backend_for_provider_tests.py --port 0 [--refresh-in header|body] [--nested] [--no-rotate]
                                       [--expires-at epoch|rfc3339] [--answer MODE]

POST /login   {"username": "alice", "password": "wonderland"} → a token set; anything else → 401.
POST /refresh the refresh token in `Authorization: Bearer …` with an empty body (header), or in
              {"refresh_token": …} (body). A known token → a new token set; the old refresh token
              is retired (rotation) unless --no-rotate, which also leaves refresh_token out of the
              answer. An unknown one → 401.
GET  /log     every request seen so far: [{"path", "authorization", "content_type", "body"}].

A token set is {"access_token", "refresh_token", "expires_in": 3600, "token_type": "Bearer"}, or with
--nested {"data": {"tokens": {"access", "refresh"}, "expires_at": …}} (epoch seconds, or RFC 3339 with
--expires-at rfc3339).

--answer MODE makes /login and /refresh answer something else, before any check:
  500, 429, 400, 401, 403, 404   that status with a JSON error body
  html                         200 with an HTML page
  html502                      502 with an HTML page
  notjson                      200 with plain text
  array                        200 with a JSON array
  oversized                    200 with a 2 MiB JSON object (more than the client reads)
  missing                      200 with a token set without the access token
  empty                        200 with "access_token": ""
  number                       200 with "access_token": 12345
  spaces / crlf / nonascii     200 with an access token holding a space / CR LF / "é"
  negative / huge / ms         200 with expires_in -5 / 400000000 / expires_at in milliseconds
  badexpiry                    200 with "expires_in": "soon"

Prints `READY <port>` once it listens.
"""

import argparse
import datetime
import itertools
import json
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

USERNAME, PASSWORD = "alice", "wonderland"


class Backend:
    def __init__(self, options):
        self.options = options
        self.lock = threading.Lock()
        self.counter = itertools.count(1)
        self.refresh_tokens = set()
        self.log = []

    def issue(self, with_refresh=True):
        n = next(self.counter)
        access, refresh = f"access-{n}", f"refresh-{n}"
        if with_refresh:
            self.refresh_tokens.add(refresh)
        expires_at = int(time.time()) + 3600
        if self.options.nested:
            data = {"tokens": {"access": access}}
            if with_refresh:
                data["tokens"]["refresh"] = refresh
            if self.options.expires_at == "rfc3339":
                data["expires_at"] = datetime.datetime.fromtimestamp(expires_at, datetime.timezone.utc).strftime(
                    "%Y-%m-%dT%H:%M:%SZ"
                )
            else:
                data["expires_at"] = expires_at
            return {"data": data}
        answer = {"access_token": access, "expires_in": 3600, "token_type": "Bearer"}
        if with_refresh:
            answer["refresh_token"] = refresh
        return answer


def special_answer(mode):
    """(status, content type, body) for --answer MODE."""
    good = {"access_token": "access-x", "refresh_token": "refresh-x", "expires_in": 3600}
    page = b"<!doctype html><html><body><h1>Bad Gateway</h1></body></html>"
    if mode in ("500", "429", "400", "401", "403", "404"):
        return int(mode), "application/json", json.dumps({"error": "nope"}).encode()
    if mode == "html":
        return 200, "text/html", page
    if mode == "html502":
        return 502, "text/html", page
    if mode == "notjson":
        return 200, "text/plain", b"access-x"
    if mode == "array":
        return 200, "application/json", b'["access-x"]'
    if mode == "oversized":
        return 200, "application/json", b'{"pad": "' + b"x" * (2 << 20) + b'"}'
    if mode == "missing":
        del good["access_token"]
    elif mode == "empty":
        good["access_token"] = ""
    elif mode == "number":
        good["access_token"] = 12345
    elif mode == "spaces":
        good["access_token"] = "access x"
    elif mode == "crlf":
        good["access_token"] = "access\r\nX-Injected: 1"
    elif mode == "nonascii":
        good["access_token"] = "acc\u00e9ss"
    elif mode == "negative":
        good["expires_in"] = -5
    elif mode == "huge":
        good["expires_in"] = 400000000
    elif mode == "ms":
        del good["expires_in"]
        good["expires_at"] = int(time.time() * 1000) + 3600000
    elif mode == "badexpiry":
        good["expires_in"] = "soon"
    else:
        raise SystemExit(f"unknown --answer {mode}")
    return 200, "application/json", json.dumps(good).encode()


def make_handler(backend):
    options = backend.options

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def send(self, status, content_type, body):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def send_json(self, status, value):
            self.send(status, "application/json", json.dumps(value).encode())

        def do_GET(self):
            if self.path == "/log":
                with backend.lock:
                    self.send_json(200, backend.log)
            else:
                self.send_json(404, {"error": "not_found"})

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            with backend.lock:
                backend.log.append(
                    {
                        "path": self.path,
                        "authorization": self.headers.get("Authorization"),
                        "content_type": self.headers.get("Content-Type"),
                        "accept": self.headers.get("Accept"),
                        "body": raw.decode("utf-8", "replace"),
                    }
                )
            if self.path not in ("/login", "/refresh"):
                return self.send_json(404, {"error": "not_found"})
            if options.answer:
                return self.send(*special_answer(options.answer))
            if self.path == "/login":
                try:
                    body = json.loads(raw)
                except ValueError:
                    return self.send_json(400, {"error": "bad_json"})
                if body.get("username") != USERNAME or body.get("password") != PASSWORD:
                    return self.send_json(401, {"error": "bad_credentials"})
                with backend.lock:
                    return self.send_json(200, backend.issue())
            # /refresh
            if options.refresh_in == "header":
                auth = self.headers.get("Authorization") or ""
                token = auth[len("Bearer "):] if auth.startswith("Bearer ") else None
                if raw:
                    return self.send_json(400, {"error": "body_not_expected"})
            else:
                try:
                    token = json.loads(raw).get("refresh_token")
                except (ValueError, AttributeError):
                    return self.send_json(400, {"error": "bad_json"})
            with backend.lock:
                if token not in backend.refresh_tokens:
                    return self.send_json(401, {"error": "invalid_refresh_token"})
                if options.rotate:
                    backend.refresh_tokens.discard(token)
                answer = backend.issue(with_refresh=options.rotate)
            return self.send_json(200, answer)

    return Handler


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--refresh-in", choices=["header", "body"], default="header")
    parser.add_argument("--nested", action="store_true")
    parser.add_argument("--no-rotate", dest="rotate", action="store_false")
    parser.add_argument("--expires-at", choices=["epoch", "rfc3339"], default="epoch")
    parser.add_argument("--answer", default=None)
    options = parser.parse_args()
    if options.answer:
        special_answer(options.answer)  # unknown modes fail at start
    server = ThreadingHTTPServer(("127.0.0.1", options.port), make_handler(Backend(options)))
    server.daemon_threads = True
    # The Swift test process starts its children with SIGTERM blocked (a blocked signal survives
    # exec), so without this PythonServer.stop() would wait 5 s and then SIGKILL.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"READY {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()

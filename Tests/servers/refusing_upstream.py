#!/usr/bin/env python3
"""An upstream that refuses the next requests on demand and remembers what every request carried,
for the tests of `inject` (CONTRACT.md "Where the credential goes"): a refused try, the one refresh
and the retry, each seen with its credential wherever the proxy put it. Stdlib only.

Run with `--port 0`: prints `READY <port>` on stdout once listening on 127.0.0.1.

  any path             200 JSON {"target": the raw request target, "headers": [[name, value], ...]}
                       unless a refusal is pending: then that status with a small JSON body
  POST /test/refuse?count=N&status=S   the next N requests answer S (401 or 403, say)
  GET  /test/requests  {"requests": [{"target", "headers", "status"}, ...]} every request so far
"""
import argparse
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import serving

LOCK = threading.Lock()
STATE = {"refuse": 0, "status": 401, "requests": []}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def reply(self, status, payload):
        serving.send_json(self, status, payload)

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        target = self.raw_requestline.decode("iso-8859-1").rstrip("\r\n").split(" ")[1]
        split = urlsplit(target)
        if split.path == "/test/refuse":
            query = parse_qs(split.query)
            with LOCK:
                STATE["refuse"] = int(query.get("count", ["1"])[0])
                STATE["status"] = int(query.get("status", ["401"])[0])
            return self.reply(200, {"ok": True})
        if split.path == "/test/requests":
            with LOCK:
                return self.reply(200, {"requests": list(STATE["requests"])})
        headers = [[name, value] for name, value in self.headers.items()]
        with LOCK:
            status = 200
            if STATE["refuse"] > 0:
                STATE["refuse"] -= 1
                status = STATE["status"]
            STATE["requests"].append({"target": target, "headers": headers, "status": status})
        if status != 200:
            return self.reply(status, {"error": "refused"})
        self.reply(200, {"target": target, "headers": headers})

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = handle_any


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print("READY %d" % server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()

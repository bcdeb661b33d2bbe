#!/usr/bin/env python3
"""An upstream that hands the credential it received back, for the scrubbing tests (CONTRACT.md
"Programs in a sandbox", "Scrubbing"). Stdlib only; `--port 0`, then `READY <port>` on stdout.

The value echoed is the request's field named by `?from=NAME` (default `authorization`, the whole
value, e.g. `Bearer TOKEN`), or with `?from=query` the raw query string. Every answer also carries
`X-Accept-Encoding` with the Accept-Encoding the request had ("" when none). Endpoints (the path's
last segment):

  /field           200, the value in an `X-Echoed` field, a body without it
  /length          200, the value twice in a Content-Length body
  /chunked         200, chunked, the value cut across two chunks, and once whole
  /split           200, Content-Length: the body up to the middle of the value's last word (the
                   token of `Bearer TOKEN`) is written and
                   flushed, then a pause (?ms=N, default 300), then the rest
  /split-chunked   the same, chunked: one chunk, a pause, the next
  /gzip            200, `Content-Encoding: gzip`, the value gzipped (as if Accept-Encoding were ignored)
"""
import argparse
import gzip
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from serving import serve_until_stopped


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        url = urlsplit(self.path)
        params = parse_qs(url.query)
        source = params.get("from", ["authorization"])[0]
        value = url.query if source == "query" else (self.headers.get(source) or "")
        value = value.encode()
        pause = int(params.get("ms", ["300"])[0]) / 1000
        endpoint = url.path.rstrip("/").split("/")[-1]
        # The cut falls inside the value's last word: the token itself is split.
        word = value.rfind(b" ") + 1
        middle = word + (len(value) - word) // 2
        if endpoint == "field":
            self.answer(b"the value is in X-Echoed\n", [("X-Echoed", value.decode())])
        elif endpoint == "length":
            self.answer(b"first: " + value + b"\nsecond: " + value + b"\n")
        elif endpoint == "chunked":
            self.begin([("Transfer-Encoding", "chunked")])
            for piece in [b"cut: " + value[:middle], value[middle:] + b"\n", b"whole: " + value + b"\n"]:
                self.chunk(piece)
            self.wfile.write(b"0\r\n\r\n")
        elif endpoint == "split":
            body = b"before " + value + b" after\n"
            cut = len(b"before ") + middle
            self.begin([("Content-Length", str(len(body)))])
            self.wfile.write(body[:cut])
            self.wfile.flush()
            time.sleep(pause)
            self.wfile.write(body[cut:])
        elif endpoint == "split-chunked":
            self.begin([("Transfer-Encoding", "chunked")])
            self.chunk(b"before " + value[:middle])
            self.wfile.flush()
            time.sleep(pause)
            self.chunk(value[middle:] + b" after\n")
            self.wfile.write(b"0\r\n\r\n")
        elif endpoint == "gzip":
            self.answer(gzip.compress(b"gzipped: " + value + b"\n"), [("Content-Encoding", "gzip")])
        else:
            self.answer(b"unknown endpoint\n", status=404)
        self.wfile.flush()

    def begin(self, fields, status=200):
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("X-Accept-Encoding", self.headers.get("Accept-Encoding") or "")
        for name, value in fields:
            self.send_header(name, value)
        self.end_headers()

    def answer(self, body, fields=(), status=200):
        self.begin([("Content-Length", str(len(body)))] + list(fields), status)
        self.wfile.write(body)

    def chunk(self, piece):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    serve_until_stopped(server)
    sys.exit(0)


if __name__ == "__main__":
    main()

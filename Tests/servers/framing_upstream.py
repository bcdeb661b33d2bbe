#!/usr/bin/env python3
"""A raw-socket HTTP/1.1 upstream that answers with scripted byte sequences, for the end-to-end
tests of how tokenproxy frames upstream answers, writes requests, relays `Expect: 100-continue`
and pools upstream connections. Standard library only.

Run with `--port 0`; prints `READY <port>` on stdout once listening. Requests are read by hand
(head up to CRLF CRLF, body by Content-Length or chunked), and the answer is chosen by the path's
last segment, so any base path works (`/f/cl` is `cl`). Every answer that has a body of its own
says which connection (`conn`, counted from 1) and which request on it (`index`, from 0) it was.

Scripts (the bytes written back):
  ok                 200 JSON {conn, index, path, auth, body_len, body_sha256}
  rawhead            200 JSON {conn, index, head_b64}: the request head exactly as received
  head-cl            200 with Content-Length: 1234; the body only when the method is not HEAD
  interim            103 Early Hints (with a Link field), then 200 "hello" (Content-Length)
  nocontent          204 with a lying Content-Length: 10 and no body
  notmodified        304 with Content-Length: 10000 and no body
  chunked-ext        chunked "hello world" with chunk extensions and a trailer field
  cl?bytes=N         N bytes of a pattern with Content-Length
  cl-differ          Content-Length: 5 and Content-Length: 6 (body "hello!")
  cl-list-differ     Content-Length: 5, 6
  cl-alpha           Content-Length: abc
  cl-negative        Content-Length: -5
  te-gzip-chunked    `Transfer-Encoding: gzip, chunked` with a gzip body in one chunk
  te-cl              chunked and a Content-Length that covers only the first chunk-size line; the
                     chunk's data is a whole HTTP response (a smuggling attempt)
  close-delimited?bytes=N   200 without any length, N pattern bytes, then close
  http10             HTTP/1.0 200 with Content-Length: 5 "hello"; the connection stays open
  http10-close?bytes=N      HTTP/1.0 200 without length, N pattern bytes, then close
  conn-close         200 "closing" with Connection: close, then close
  big-head?kib=N     200 with N KiB of header fields
  garbage-open       an SSH banner; the connection stays open
  bad-status         `HTTP/1.1 2x0 OK`; the connection stays open
  bad-field          a field line without a colon; the connection stays open
  cut-cl             Content-Length: 10000, 5000 bytes, close
  cut-chunked        chunked, 5000 bytes in chunks, close without the last chunk
  close-before       closes without answering
  never              never answers (reads until the peer closes)
  expect             with Expect: 100-continue: `100 Continue` (X-Interim-From: framing-upstream),
                     then reads the body; 200 JSON {conn, expect, sent_100, body_len, body_sha256}
  expect-refuse?status=N   answers N (Connection: close) without reading the body, then counts
                     the bytes that still arrive until the peer closes
  expect-auth        the first request of a tag gets 401 without 100 (counted like
                     expect-refuse); a request with another token gets 100, its body read, 200
  sink?rate=B        reads the body at B bytes/s (Content-Length or chunked); 200 JSON {body_len}
  source?bytes=N     N bytes with Content-Length, as fast as the peer takes them

Query `tag=T` files the request under T in the records (who, which token, how many body bytes).
Control (ask directly, not through the proxy):
  /_stats            JSON {connections, open, requests, tags, closed}
  /_wait?tag=T       waits (up to 15 s) until every connection that carried tag T is closed

Flags: `--drop-reused` closes, without answering, any request that arrives on a connection
that already answered one; `--close-after-response` closes every connection after each answer
although the answer promised nothing of the kind.
"""
import argparse
import base64
import gzip
import hashlib
import json
import socket
import sys
import threading
import time
from urllib.parse import parse_qs, urlsplit

PATTERN = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ\n"

lock = threading.Condition()
state = {"connections": 0, "open": 0, "requests": 0, "tags": {}, "closed": []}
FLAGS = None


def pattern(n):
    reps = n // len(PATTERN) + 1
    return (PATTERN * reps)[:n]


class Closed(Exception):
    pass


class Conn:
    def __init__(self, sock, conn_id):
        self.sock = sock
        self.id = conn_id
        self.buf = b""
        self.counted = False
        self.tags = set()

    def fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise Closed()
        self.buf += data

    def read_head(self):
        while b"\r\n\r\n" not in self.buf:
            if len(self.buf) > 1 << 20:
                raise Closed()
            self.fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        return head + b"\r\n\r\n"

    def read_exact(self, n, rate=None, started=None, done=0):
        out = bytearray()
        while len(out) < n:
            if not self.buf:
                self.fill()
            take = self.buf[: n - len(out)]
            self.buf = self.buf[len(take):]
            out += take
            throttle(rate, started, done + len(out))
        return bytes(out)

    def read_line(self):
        while b"\r\n" not in self.buf:
            self.fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def send(self, data):
        self.sock.sendall(data)


def throttle(rate, started, done):
    if rate:
        ahead = done / rate - (time.monotonic() - started)
        if ahead > 0:
            time.sleep(ahead)


def parse_head(head):
    lines = head[:-4].split(b"\r\n")
    method, target, version = (lines[0].split(b" ") + [b"", b""])[:3]
    fields = []
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        fields.append((name, value.strip()))
    return method.decode("latin-1"), target.decode("latin-1"), version, fields


def field(fields, name):
    for n, v in fields:
        if n.lower() == name:
            return v
    return None


def read_body(conn, fields, rate=None, keep=True):
    """Reads a body as the request's framing says; returns (length, sha256 hex, bytes or None)."""
    started = time.monotonic()
    digest = hashlib.sha256()
    kept = bytearray() if keep else None
    total = 0

    def take(left):
        nonlocal total
        while left:
            piece = conn.read_exact(min(left, 1 << 20), rate, started, total)
            digest.update(piece)
            if kept is not None:
                kept.extend(piece)
            total += len(piece)
            left -= len(piece)

    te = field(fields, b"transfer-encoding")
    if te is not None and te.lower() == b"chunked":
        while True:
            size = int(conn.read_line().split(b";")[0].strip(), 16)
            if size == 0:
                while conn.read_line() != b"":
                    pass
                break
            take(size)
            conn.read_line()
    else:
        take(int(field(fields, b"content-length") or b"0"))
    return total, digest.hexdigest(), (bytes(kept) if kept is not None else None)


def respond(conn, status, reason, body, ctype=b"application/json", extra=b""):
    conn.send(b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n%s\r\n" % (status, reason, ctype, len(body), extra) + body)


def json_body(obj):
    return json.dumps(obj).encode()


def record(tag, conn, **values):
    if tag is None:
        return None
    with lock:
        entry = {"conn": conn.id, "closed": False}
        entry.update(values)
        state["tags"].setdefault(tag, []).append(entry)
        conn.tags.add(tag)
        lock.notify_all()
        return entry


def count_until_close(conn, entry):
    """After a final answer the body never asked for: count what still arrives, until EOF."""
    try:
        conn.sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    got = len(conn.buf)
    conn.buf = b""
    conn.sock.settimeout(15)
    try:
        while True:
            data = conn.sock.recv(65536)
            if not data:
                break
            got += len(data)
    except OSError:
        pass
    with lock:
        if entry is not None:
            entry["post_final_bytes"] = got
    raise Closed()


def control(conn, target):
    split = urlsplit(target)
    query = parse_qs(split.query)
    if split.path == "/_wait":
        tag = query.get("tag", [""])[0]
        deadline = time.monotonic() + 15
        with lock:
            while True:
                entries = state["tags"].get(tag, [])
                if entries and all(e["closed"] for e in entries):
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                lock.wait(left)
            body = json_body({"tag": tag, "entries": entries})
    else:
        with lock:
            body = json_body(state)
    respond(conn, 200, b"OK", body, extra=b"Connection: close\r\n")
    raise Closed()


def handle(conn, index):
    head = conn.read_head()
    method, target, version, fields = parse_head(head)
    if target.startswith("/_"):
        control(conn, target)
    if not conn.counted:
        conn.counted = True
        with lock:
            state["connections"] += 1
            state["open"] += 1
    with lock:
        state["requests"] += 1
    if FLAGS.drop_reused and index > 0:
        raise Closed()
    split = urlsplit(target)
    query = parse_qs(split.query)
    name = split.path.rsplit("/", 1)[-1]
    tag = query.get("tag", [None])[0]
    auth = (field(fields, b"authorization") or b"").decode("latin-1")
    expect = (field(fields, b"expect") or b"").lower() == b"100-continue"

    def qint(key, default):
        try:
            return int(query.get(key, [default])[0])
        except ValueError:
            return default

    ident = {"conn": conn.id, "index": index}

    if name == "rawhead":
        read_body(conn, fields, keep=False)
        respond(conn, 200, b"OK", json_body(dict(ident, head_b64=base64.b64encode(head).decode())))
    elif name == "head-cl":
        read_body(conn, fields, keep=False)
        conn.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1234\r\n\r\n")
        if method != "HEAD":
            conn.send(pattern(1234))
    elif name == "interim":
        read_body(conn, fields, keep=False)
        conn.send(b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\n\r\n")
        conn.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello")
    elif name == "nocontent":
        read_body(conn, fields, keep=False)
        conn.send(b"HTTP/1.1 204 No Content\r\nContent-Length: 10\r\nX-Script: nocontent\r\n\r\n")
    elif name == "notmodified":
        read_body(conn, fields, keep=False)
        conn.send(b"HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\nContent-Length: 10000\r\n\r\n")
    elif name == "chunked-ext":
        read_body(conn, fields, keep=False)
        conn.send(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nTrailer: X-Checksum\r\n\r\n"
            b"5;name=value\r\nhello\r\n"
            b"6;quoted=\"a;b\";flag\r\n world\r\n"
            b"0;last=yes\r\nX-Checksum: 5eb63bbbe01eeed0\r\n\r\n")
    elif name == "cl":
        read_body(conn, fields, keep=False)
        n = qint("bytes", 100)
        conn.send(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n" % n + pattern(n))
    elif name in ("cl-differ", "cl-list-differ", "cl-alpha", "cl-negative"):
        read_body(conn, fields, keep=False)
        value = {"cl-differ": b"5\r\nContent-Length: 6", "cl-list-differ": b"5, 6", "cl-alpha": b"abc", "cl-negative": b"-5"}[name]
        conn.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %s\r\n\r\nhello!" % value)
    elif name == "te-cl":
        read_body(conn, fields, keep=False)
        inner = b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\nX-Smuggled: yes\r\n\r\nSMUGGLED"
        size_line = b"%x\r\n" % len(inner)
        conn.send(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nContent-Length: %d\r\n\r\n" % len(size_line)
            + size_line + inner + b"\r\n0\r\n\r\n")
    elif name == "te-gzip-chunked":
        read_body(conn, fields, keep=False)
        gz = gzip.compress(b"hello, compressed world")
        conn.send(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
            + b"%x\r\n" % len(gz) + gz + b"\r\n0\r\n\r\n")
    elif name in ("close-delimited", "http10-close"):
        read_body(conn, fields, keep=False)
        version = b"HTTP/1.0" if name == "http10-close" else b"HTTP/1.1"
        conn.send(version + b" 200 OK\r\nContent-Type: application/octet-stream\r\n\r\n" + pattern(qint("bytes", 1000)))
        raise Closed()
    elif name == "http10":
        read_body(conn, fields, keep=False)
        conn.send(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello")
    elif name == "conn-close":
        read_body(conn, fields, keep=False)
        respond(conn, 200, b"OK", json_body(ident), extra=b"Connection: close\r\n")
        raise Closed()
    elif name == "big-head":
        read_body(conn, fields, keep=False)
        total = qint("kib", 100) * 1024
        lines = []
        size = 0
        i = 0
        while size < total:
            line = b"X-Filler-%d: %s\r\n" % (i, b"f" * 1000)
            lines.append(line)
            size += len(line)
            i += 1
        conn.send(b"HTTP/1.1 200 OK\r\n" + b"".join(lines) + b"Content-Length: 2\r\n\r\nok")
    elif name in ("garbage-open", "bad-status", "bad-field"):
        read_body(conn, fields, keep=False)
        conn.send({
            "garbage-open": b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n",
            "bad-status": b"HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n",
            "bad-field": b"HTTP/1.1 200 OK\r\nthis line has no colon\r\nContent-Length: 2\r\n\r\nok",
        }[name])
        while True:
            conn.fill()
    elif name == "cut-cl":
        read_body(conn, fields, keep=False)
        conn.send(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 10000\r\n\r\n" + pattern(5000))
        raise Closed()
    elif name == "cut-chunked":
        read_body(conn, fields, keep=False)
        conn.send(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(5):
            conn.send(b"3e8\r\n" + pattern(1000) + b"\r\n")
        raise Closed()
    elif name == "close-before":
        raise Closed()
    elif name == "never":
        while True:
            conn.fill()
    elif name == "expect":
        sent_100 = False
        if expect:
            conn.send(b"HTTP/1.1 100 Continue\r\nX-Interim-From: framing-upstream\r\n\r\n")
            sent_100 = True
        length, digest, _ = read_body(conn, fields, keep=False)
        record(tag, conn, auth=auth, expect=expect, body_len=length)
        respond(conn, 200, b"OK", json_body(dict(ident, expect=expect, sent_100=sent_100, body_len=length, body_sha256=digest)))
    elif name == "expect-refuse":
        status = qint("status", 417)
        entry = record(tag, conn, auth=auth, expect=expect, status=status)
        respond(conn, status, b"Refused", json_body(dict(ident, refused=status)), extra=b"Connection: close\r\n")
        count_until_close(conn, entry)
    elif name == "expect-auth":
        with lock:
            first = tag not in state["tags"]
            first_auth = None if first else state["tags"][tag][0]["auth"]
        if first or auth == first_auth:
            entry = record(tag, conn, auth=auth, expect=expect, status=401)
            respond(conn, 401, b"Unauthorized", json_body({"auth": "refused"}),
                    extra=b"WWW-Authenticate: Bearer realm=\"framing\"\r\nConnection: close\r\n")
            count_until_close(conn, entry)
        sent_100 = False
        if expect:
            conn.send(b"HTTP/1.1 100 Continue\r\nX-Interim-From: framing-upstream\r\n\r\n")
            sent_100 = True
        length, digest, _ = read_body(conn, fields, keep=False)
        record(tag, conn, auth=auth, expect=expect, status=200, body_len=length)
        respond(conn, 200, b"OK", json_body(dict(ident, expect=expect, sent_100=sent_100, body_len=length, body_sha256=digest)))
    elif name == "sink":
        length, digest, _ = read_body(conn, fields, rate=qint("rate", 0) or None, keep=False)
        respond(conn, 200, b"OK", json_body(dict(ident, body_len=length, body_sha256=digest)))
    elif name == "source":
        read_body(conn, fields, keep=False)
        n = qint("bytes", 0)
        conn.send(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n" % n)
        block = pattern(1 << 20)
        while n > 0:
            piece = block[: min(n, len(block))]
            conn.send(piece)
            n -= len(piece)
    else:
        length, digest, _ = read_body(conn, fields, keep=False)
        record(tag, conn, auth=auth, expect=expect, body_len=length)
        respond(conn, 200, b"OK", json_body(dict(ident, path=target, auth=auth, body_len=length, body_sha256=digest)))
    if FLAGS.close_after_response:
        raise Closed()


def serve(sock, conn_id):
    conn = Conn(sock, conn_id)
    index = 0
    try:
        while True:
            handle(conn, index)
            index += 1
    except (Closed, OSError, ValueError, IndexError):
        pass
    finally:
        try:
            sock.close()
        except OSError:
            pass
        with lock:
            if conn.counted:
                state["open"] -= 1
                state["closed"].append(conn.id)
            for entries in state["tags"].values():
                for e in entries:
                    if e["conn"] == conn.id:
                        e["closed"] = True
            lock.notify_all()


def main():
    global FLAGS
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--drop-reused", action="store_true")
    parser.add_argument("--close-after-response", action="store_true")
    FLAGS = parser.parse_args()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((FLAGS.host, FLAGS.port))
    listener.listen(256)
    print("READY %d" % listener.getsockname()[1], flush=True)
    next_id = 0
    while True:
        sock, _ = listener.accept()
        next_id += 1
        threading.Thread(target=serve, args=(sock, next_id), daemon=True).start()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass

#!/usr/bin/env python3
"""A TLS client on raw sockets (Python's ssl module), run by tokenproxy's end-to-end tests where
curl cannot say exactly what happened: a CONNECT with chosen fields, an SNI that differs from the
CONNECT host, requests whose Host lies, the ALPN the server chose, the certificate it presented.
Prints one JSON object on stdout. Standard library only.

  exchange --port P [--connect HOST:PORT [--connect-version 1.0|1.1] [--no-connect-host]
           [--connect-header 'Name: value' ...]] [--plain] [--sni NAME] [--cafile F | --no-verify]
           [--cert F --key F] [--alpn h2,http/1.1] [--tls-version 1.1|1.2|1.3]
           [--request JSON ...] [--pause-after N | --pipeline]
      One connection to 127.0.0.1:P: an optional CONNECT first, then TLS (unless --plain), then each
      request in turn on the same connection, each read whole. A request is
      {"method", "target", "headers": [[name, value]], "body"}; Content-Length is added for a body.
      --pause-after N prints "PAUSED" (not JSON) after N answers and waits for a line on stdin;
      --pipeline writes every request at once, then reads the answers.
      {"connect": {"status", "head", "body" (when refused)} | null, "tls": {"ok", "error", "version", "alpn", "cert_sha256"},
       "responses": [{"status", "headers", "body"}], "error": str | null}
  loop --port P --cafile F [--sni NAME] [--count N] [--host-header H]
      GET /loop/I, each on a new TLS connection (a handshake each), N times or until stdin closes;
      prints "SEEN <sha256>" (not JSON) when a certificate is first seen, "FIRST" once the first
      request succeeded; the JSON comes last, on a line of its own.
      {"ok": n, "failed": n, "errors": [first few], "fingerprints": [distinct, in order seen]}
  bad --port P --count N
      N connections that each fail a handshake: plain HTTP, a ClientHello for TLS 1.0/1.1 only,
      a TLS record of garbage, in turn. {"sent": n, "kinds": {...}}
"""
import argparse
import hashlib
import http.client
import json
import os
import select
import socket
import ssl
import sys
import threading
import warnings

# TLS 1.0 and 1.1 are offered on purpose (to be refused).
warnings.filterwarnings("ignore", category=DeprecationWarning)

TLS_VERSIONS = {"1.1": ssl.TLSVersion.TLSv1_1, "1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}


class Reader:
    """Hands http.client the same buffered reader for every response of one connection (it closes
    the reader it was given after each body: here that close does nothing)."""

    class Kept:
        def __init__(self, file):
            self.file = file

        def __getattr__(self, name):
            return getattr(self.file, name)

        def close(self):
            pass

    def __init__(self, sock):
        self.file = Reader.Kept(sock.makefile("rb"))

    def makefile(self, *args, **kwargs):
        return self.file


def client_context(args):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if getattr(args, "no_verify", False):
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif args.cafile:
        context.load_verify_locations(args.cafile)
    else:
        context.load_default_certs()
    version = getattr(args, "tls_version", None)
    if version:
        if version == "1.1":
            # TLS 1.1 needs security level 0 in OpenSSL 3; the server must still refuse it.
            context.set_ciphers("DEFAULT:@SECLEVEL=0")
        context.minimum_version = TLS_VERSIONS[version]
        context.maximum_version = TLS_VERSIONS[version]
    if getattr(args, "cert", None):
        context.load_cert_chain(args.cert, args.key)
    if getattr(args, "alpn", None):
        context.set_alpn_protocols(args.alpn.split(","))
    return context


def request_bytes(request):
    body = request.get("body", "").encode()
    head = "%s %s HTTP/1.1\r\n" % (request.get("method", "GET"), request["target"])
    for name, value in request.get("headers", []):
        head += "%s: %s\r\n" % (name, value)
    if body:
        head += "Content-Length: %d\r\n" % len(body)
    return head.encode() + b"\r\n" + body


def read_connect_answer(sock):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(1)  # byte by byte: what follows the head belongs to TLS
        if not chunk:
            break
        data += chunk
    head = data.decode("iso-8859-1")
    parts = head.split(" ", 2)
    status = int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else 0
    return status, head


def exchange(args):
    result = {"connect": None, "tls": None, "responses": [], "error": None}
    sock = socket.create_connection(("127.0.0.1", args.port), timeout=30)
    try:
        if args.connect:
            line = "CONNECT %s HTTP/%s\r\n" % (args.connect, args.connect_version)
            if not args.no_connect_host:
                line += "Host: %s\r\n" % args.connect
            for field in args.connect_header:
                line += field + "\r\n"
            sock.sendall((line + "\r\n").encode())
            status, head = read_connect_answer(sock)
            result["connect"] = {"status": status, "head": head}
            if status != 200:
                result["connect"]["body"] = read_refusal_body(sock, head)
                return result
        if not args.plain:
            sni = args.sni or (args.connect.rsplit(":", 1)[0].strip("[]") if args.connect else "localhost")
            try:
                sock = client_context(args).wrap_socket(sock, server_hostname=sni)
                der = sock.getpeercert(binary_form=True)
                result["tls"] = {
                    "ok": True, "version": sock.version(), "alpn": sock.selected_alpn_protocol(),
                    "cert_sha256": hashlib.sha256(der).hexdigest() if der else None,
                }
            except (ssl.SSLError, OSError) as error:
                result["tls"] = {"ok": False, "error": "%s: %s" % (type(error).__name__, error)}
                return result
        reader = Reader(sock)
        if args.pipeline:
            # Every request written before any answer is read (RFC 9112 §9.3.2).
            requests = [json.loads(text) for text in args.request]
            sock.sendall(b"".join(request_bytes(request) for request in requests))
            for request in requests:
                result["responses"].append(read_one(reader, request.get("method", "GET")))
            return result
        for index, text in enumerate(args.request):
            if args.pause_after is not None and index == args.pause_after:
                print("PAUSED", flush=True)
                sys.stdin.readline()
            request = json.loads(text)
            sock.sendall(request_bytes(request))
            result["responses"].append(read_one(reader, request.get("method", "GET")))
    except Exception as error:  # reported, not raised: the test prints it
        result["error"] = "%s: %s" % (type(error).__name__, error)
    finally:
        sock.close()
    return result


def read_refusal_body(sock, head):
    """The body of a refused CONNECT (the contract's JSON error), read up to its Content-Length."""
    length = 0
    for line in head.split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    body = b""
    while len(body) < length:
        chunk = sock.recv(length - len(body))
        if not chunk:
            break
        body += chunk
    return body.decode("utf-8", "replace")


def read_one(reader, method):
    response = http.client.HTTPResponse(reader, method=method)
    response.begin()
    body = response.read()
    return {
        "status": response.status,
        "headers": [[name, value] for name, value in response.getheaders()],
        "body": body.decode("utf-8", "replace"),
    }


def loop(args):
    outcome = {"ok": 0, "failed": 0, "errors": [], "fingerprints": []}
    stop = threading.Event()
    if args.count is None:
        def wait_for_stdin():
            sys.stdin.read()
            stop.set()
        threading.Thread(target=wait_for_stdin, daemon=True).start()
    context = client_context(args)
    index = 0
    while not stop.is_set() and (args.count is None or index < args.count):
        index += 1
        try:
            with socket.create_connection(("127.0.0.1", args.port), timeout=30) as raw:
                with context.wrap_socket(raw, server_hostname=args.sni) as sock:
                    fingerprint = hashlib.sha256(sock.getpeercert(binary_form=True)).hexdigest()
                    if fingerprint not in outcome["fingerprints"]:
                        outcome["fingerprints"].append(fingerprint)
                        print("SEEN " + fingerprint, flush=True)
                    request = {"target": "/loop/%d" % index, "headers": [["Host", args.host_header], ["Connection", "close"]]}
                    sock.sendall(request_bytes(request))
                    answer = read_one(Reader(sock), "GET")
                    if answer["status"] != 200:
                        raise RuntimeError("status %d" % answer["status"])
            outcome["ok"] += 1
            if outcome["ok"] == 1:
                print("FIRST", flush=True)
        except Exception as error:
            outcome["failed"] += 1
            if len(outcome["errors"]) < 5:
                outcome["errors"].append("request %d: %s: %s" % (index, type(error).__name__, error))
    return outcome


def tls11_client_hello(host):
    """A ClientHello offering TLS 1.0 and 1.1 only, from OpenSSL itself when it still can."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_ciphers("DEFAULT:@SECLEVEL=0")
    context.minimum_version = ssl.TLSVersion.TLSv1
    context.maximum_version = ssl.TLSVersion.TLSv1_1
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = context.wrap_bio(incoming, outgoing, server_hostname=host)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def bad(args):
    kinds = {"plain_http": 0, "old_version": 0, "garbage_record": 0}
    try:
        old_hello = tls11_client_hello("localhost")
    except ssl.SSLError:
        old_hello = b""
    for index in range(args.count):
        kind = ["plain_http", "old_version", "garbage_record"][index % 3]
        if kind == "old_version" and not old_hello:
            kind = "garbage_record"
        payload = {
            "plain_http": b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
            "old_version": old_hello,
            "garbage_record": b"\x16\x03\x01\x00\x40" + os.urandom(64),
        }[kind]
        try:
            with socket.create_connection(("127.0.0.1", args.port), timeout=30) as sock:
                sock.sendall(payload)
                # Wait for the server to answer (an alert) or close, at most 10 s.
                readable, _, _ = select.select([sock], [], [], 10)
                if readable:
                    try:
                        sock.recv(4096)
                    except OSError:
                        pass
        except OSError:
            pass
        kinds[kind] += 1
    return {"sent": args.count, "kinds": kinds}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("exchange")
    one.add_argument("--port", type=int, required=True)
    one.add_argument("--connect")
    one.add_argument("--connect-version", default="1.1")
    one.add_argument("--no-connect-host", action="store_true")
    one.add_argument("--connect-header", action="append", default=[])
    one.add_argument("--plain", action="store_true")
    one.add_argument("--sni")
    one.add_argument("--cafile")
    one.add_argument("--no-verify", action="store_true")
    one.add_argument("--cert")
    one.add_argument("--key")
    one.add_argument("--alpn")
    one.add_argument("--tls-version", choices=sorted(TLS_VERSIONS))
    one.add_argument("--request", action="append", default=[])
    one.add_argument("--pause-after", type=int)
    one.add_argument("--pipeline", action="store_true")
    many = sub.add_parser("loop")
    many.add_argument("--port", type=int, required=True)
    many.add_argument("--cafile", required=True)
    many.add_argument("--sni", default="localhost")
    many.add_argument("--host-header", default="localhost")
    many.add_argument("--count", type=int)
    broken = sub.add_parser("bad")
    broken.add_argument("--port", type=int, required=True)
    broken.add_argument("--count", type=int, default=200)
    args = parser.parse_args()
    result = {"exchange": exchange, "loop": loop, "bad": bad}[args.command](args)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""An HTTP proxy that answers every CONNECT by opening a connection to one fixed address, whatever
host the CONNECT names: a host name that resolves nowhere on a machine without DNS (such as
`mybucket.s3.eu-west-1.amazonaws.com`) then reaches a local server, the name untouched in what
flows through the tunnel (Host, TLS SNI).

    connect_relay.py --port 0 --to 127.0.0.1:PORT [--tls-cert CERT --tls-key KEY]

With --tls-cert the relay ends TLS itself inside each tunnel (with that certificate) and passes the
plain bytes on: a plain-http server stands for an https one.

GET /targets answers the CONNECT targets seen so far, in order, as a JSON list.
"""

import argparse
import json
import select
import socket
import socketserver
import ssl
import sys
import threading

import serving

TARGETS = []
LOCK = threading.Lock()
DESTINATION = None
TLS = None


def read_head(sock):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            return None, b""
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head.decode("latin-1"), rest


def relay(client, upstream):
    """Bytes both ways until either side closes (one thread: a TLS socket is read and written here only)."""
    ends = {client: upstream, upstream: client}
    while True:
        readable, _, _ = select.select(list(ends), [], [], 120)
        if not readable:
            return
        for source in readable:
            try:
                chunk = source.recv(65536)
            except ssl.SSLWantReadError:
                continue
            except OSError:
                return
            if not chunk:
                return
            ends[source].sendall(chunk)
            while isinstance(source, ssl.SSLSocket) and source.pending():
                ends[source].sendall(source.recv(65536))


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        client = self.request
        head, rest = read_head(client)
        if head is None:
            return
        method, target, _ = head.split("\r\n", 1)[0].split(" ", 2)
        if method == "GET" and target == "/targets":
            with LOCK:
                body = json.dumps(TARGETS).encode()
            client.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            return
        if method != "CONNECT":
            client.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
            return
        with LOCK:
            TARGETS.append(target)
        upstream = socket.create_connection(DESTINATION, timeout=30)
        upstream.settimeout(None)
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        if TLS is not None:
            client = TLS.wrap_socket(client, server_side=True)
        elif rest:
            upstream.sendall(rest)
        try:
            relay(client, upstream)
        finally:
            upstream.close()


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    global DESTINATION, TLS
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--to", required=True, help="HOST:PORT every tunnel goes to")
    parser.add_argument("--tls-cert")
    parser.add_argument("--tls-key")
    args = parser.parse_args()
    if args.tls_cert:
        TLS = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        TLS.load_cert_chain(args.tls_cert, args.tls_key)
    host, _, port = args.to.rpartition(":")
    DESTINATION = (host, int(port))
    server = Server(("127.0.0.1", args.port), Handler)
    serving.serve_until_stopped(server)
    sys.exit(0)


if __name__ == "__main__":
    main()

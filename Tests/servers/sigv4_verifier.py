#!/usr/bin/env python3
"""A SigV4 verifier that sees the request target byte for byte, for what moto cannot check (its
view of the path is werkzeug's re-quoted IRI, so keys with UTF-8 or reserved characters fail even
for boto3's own requests). The signature is recomputed with botocore's signers (S3SigV4Auth for
`s3`, SigV4Auth for every other service) over the fields SignedHeaders names, with X-Amz-Date as
the time; a body whose SHA-256 differs from X-Amz-Content-Sha256 (unless UNSIGNED-PAYLOAD) is
refused too. Objects PUT are kept in memory and a GET returns them.

    sigv4_verifier.py --port 0 --key ACCESS_KEY_ID:SECRET [--key ...]

Answers 200 (with the stored body for a GET), 404 for an unknown object, 403 with
SignatureDoesNotMatch and the canonical request it computed when the signature is wrong.
"""

import argparse
import hashlib
import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from botocore.auth import S3SigV4Auth, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

KEYS = {}
OBJECTS = {}


def parse_authorization(value):
    if not value.startswith("AWS4-HMAC-SHA256 "):
        return None
    parts = {}
    for item in value[len("AWS4-HMAC-SHA256 "):].split(","):
        name, _, field = item.strip().partition("=")
        parts[name] = field
    return parts


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body=b"", content_type="text/plain"):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def check(self, body):
        auth = parse_authorization(self.headers.get("Authorization", ""))
        if auth is None:
            return "no SigV4 Authorization"
        access_key, date, region, service, _ = auth["Credential"].split("/")
        if access_key not in KEYS:
            return "InvalidAccessKeyId"
        declared = self.headers.get("X-Amz-Content-Sha256")
        if declared not in (None, "UNSIGNED-PAYLOAD") and declared != hashlib.sha256(body).hexdigest():
            return "XAmzContentSHA256Mismatch"
        names = auth["SignedHeaders"].split(";")
        headers = {}
        for name in names:
            values = self.headers.get_all(name)
            if values is None:
                return f"signed field {name} missing"
            headers[name] = ",".join(values)
        # The raw request target, exactly as it arrived.
        request = AWSRequest(method=self.command, url=f"http://{self.headers['Host']}{self.path}", headers=headers, data=body)
        request.context["timestamp"] = self.headers["X-Amz-Date"]
        secret, token = KEYS[access_key]
        if token is not None and self.headers.get("X-Amz-Security-Token") != token:
            return "InvalidToken"
        signer = (S3SigV4Auth if service == "s3" else SigV4Auth)(Credentials(access_key, secret, token), service, region)
        canonical = signer.canonical_request(request)
        expected = signer.signature(signer.string_to_sign(request, canonical), request)
        if expected != auth["Signature"]:
            return "SignatureDoesNotMatch\n" + canonical
        return None

    def handle_any(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length) if length else b""
        problem = self.check(body)
        if problem is not None:
            self.answer(403, problem.encode())
            return
        if self.command == "PUT":
            OBJECTS[self.path] = body
            self.answer(200)
        elif self.path in OBJECTS:
            self.answer(200, OBJECTS[self.path], "application/octet-stream")
        else:
            self.answer(404, b"NoSuchKey")

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = handle_any


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--key", action="append", default=[], help="ACCESS_KEY_ID:SECRET[:SESSION_TOKEN]")
    args = parser.parse_args()
    for item in args.key:
        access_key, secret, *token = item.split(":", 2)
        KEYS[access_key] = (secret, token[0] if token else None)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print(f"READY {server.server_address[1]}", flush=True)
    parent = os.getppid()

    def leave_with_parent():
        while os.getppid() == parent:
            threading.Event().wait(1)
        server.shutdown()

    threading.Thread(target=leave_with_parent, daemon=True).start()
    server.serve_forever()
    sys.exit(0)


if __name__ == "__main__":
    main()

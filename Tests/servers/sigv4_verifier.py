#!/usr/bin/env python3
"""A SigV4 verifier that sees the request target byte for byte, for what moto cannot check (its
view of the path is werkzeug's re-quoted IRI, so keys with UTF-8 or reserved characters fail even
for boto3's own requests). The signature is recomputed with botocore's signers (S3SigV4Auth for
`s3`, SigV4Auth for every other service) over the fields SignedHeaders names, with X-Amz-Date as
the time; a body whose SHA-256 differs from X-Amz-Content-Sha256 (unless UNSIGNED-PAYLOAD) is
refused too. Objects PUT are kept in memory under their decoded path (as S3 decodes a key: every
spelling of one key is one object) and a GET returns them.

    sigv4_verifier.py --port 0 --key ACCESS_KEY_ID:SECRET [--key ...] [--decode-path]

With --decode-path the path is decoded and encoded again (RFC 3986 unreserved bytes and `/` kept,
every other byte escaped with upper-case hex) before the signature is recomputed, as S3 reads it;
without it the path is read as sent.

Answers 200 (with the stored body for a GET), 404 for an unknown object, 403 with
SignatureDoesNotMatch and the canonical request it computed when the signature is wrong.

With --expired-key ACCESS_KEY_ID, a request signed with that key gets 403 as AWS answers expired
credentials, in the form the path asks for: `/header/...` an `x-amzn-ErrorType:
ExpiredTokenException:...` field, `/apigw/...` API Gateway's JSON message, any other path S3's XML
`<Code>ExpiredToken</Code>` (a HEAD: no body). A well signed request to `/denied/...` gets 403
AccessDenied. GET /calls answers how many requests each access key signed, as JSON.
"""

import argparse
import hashlib
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote, unquote_to_bytes

from botocore.auth import S3SigV4Auth, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
import serving

KEYS = {}
OBJECTS = {}
EXPIRED = set()
SIGNED_BY = {}
LOCK = threading.Lock()
DECODE_PATH = False


def object_key(target):
    return unquote_to_bytes(target.partition("?")[0])


def path_as_read(target):
    """The request target with its path as the signature is recomputed over."""
    if not DECODE_PATH:
        return target
    path, mark, query = target.partition("?")
    return quote(unquote_to_bytes(path), safe="/~") + mark + query


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
        serving.send(self, status, body, content_type)

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
        # The raw request target, exactly as it arrived (or its path decoded and encoded again).
        url = f"http://{self.headers['Host']}{path_as_read(self.path)}"
        request = AWSRequest(method=self.command, url=url, headers=headers, data=body)
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

    def expired(self):
        if self.path.startswith("/header/"):
            self.send_response(403)
            self.send_header("x-amzn-ErrorType", "ExpiredTokenException:http://internal.amazon.com/coral/com.amazon.coral.service/")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")
        elif self.path.startswith("/apigw/"):
            self.answer(403, b'{"message":"The security token included in the request is expired"}', "application/json")
        elif self.command == "HEAD":
            self.send_response(403)
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self.answer(403, b"<Error><Code>ExpiredToken</Code><Message>The provided token has expired.</Message></Error>", "application/xml")

    def handle_any(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length) if length else b""
        if self.path == "/calls":
            with LOCK:
                self.answer(200, json.dumps(SIGNED_BY).encode(), "application/json")
            return
        auth = parse_authorization(self.headers.get("Authorization", "")) or {}
        access_key = auth.get("Credential", "").split("/")[0]
        with LOCK:
            SIGNED_BY[access_key] = SIGNED_BY.get(access_key, 0) + 1
        if access_key in EXPIRED:
            self.expired()
            return
        problem = self.check(body)
        if problem is not None:
            self.answer(403, problem.encode())
            return
        if self.path.startswith("/denied/"):
            self.answer(403, b"<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>", "application/xml")
        elif self.command == "PUT":
            OBJECTS[object_key(self.path)] = body
            self.answer(200)
        elif object_key(self.path) in OBJECTS:
            self.answer(200, OBJECTS[object_key(self.path)], "application/octet-stream")
        else:
            self.answer(404, b"NoSuchKey")

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = handle_any


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--key", action="append", default=[], help="ACCESS_KEY_ID:SECRET[:SESSION_TOKEN]")
    parser.add_argument("--expired-key", action="append", default=[], help="ACCESS_KEY_ID answered as expired")
    parser.add_argument("--decode-path", action="store_true", help="recompute over the path decoded and encoded again, as S3 does")
    args = parser.parse_args()
    global DECODE_PATH
    DECODE_PATH = args.decode_path
    EXPIRED.update(args.expired_key)
    for item in args.key:
        access_key, secret, *token = item.split(":", 2)
        KEYS[access_key] = (secret, token[0] if token else None)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    serving.serve_until_stopped(server)
    sys.exit(0)


if __name__ == "__main__":
    main()

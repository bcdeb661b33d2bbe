#!/usr/bin/env python3
"""Metadata services as their published documentation describes them, for tokenproxy's
gce_metadata and azure_managed_identity tests (standard library only). Prints `READY <port>`.

  GCE / GKE:  GET /computeMetadata/v1/instance/service-accounts/ACCOUNT/token[?scopes=a,b]
              GET /computeMetadata/v1/instance/service-accounts/ACCOUNT/identity?audience=A&format=full
              both need `Metadata-Flavor: Google` (else 403) and answer with that header; the
              token answer is JSON {access_token, expires_in (number), token_type}; the identity
              answer is the ID token itself (a JWT). Accounts: `default` and --account NAME.
  Azure IMDS: GET /metadata/identity/oauth2/token?api-version=2018-02-01&resource=R[&client_id=C]
              needs `Metadata: true` (else 400 invalid_request); JSON with expires_in and
              expires_on as strings of seconds.
  App Service / Container Apps: GET /msi/token?api-version=2019-08-01&resource=R[&client_id=C]
              needs `X-IDENTITY-HEADER` equal to --identity-header (else 401).
  GET /api/...  a protected resource: 200 {"source", "audience", "client_id"} for a token issued
              here and still valid, else 401.
  GET /test/stats  {"calls": {"gce": n, "gce_id": n, "imds": n, "appservice": n}, "refused": n,
              "queries": [the query of every token call]}
  POST /test/garbage  token calls answer 200 with a body that is no token, until POST /test/good.
Flags: --ttl S (token lifetime, default 3600), --identity-header SECRET, --account NAME,
--no-flavor (GCE answers lack `Metadata-Flavor: Google`, as a server that is not Google's would).
"""
import argparse
import base64
import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

LOCK = threading.Lock()
OPTS = None
TOKENS = {}  # token -> (source, audience, client_id, expires_at)
STATS = {"calls": {}, "refused": 0, "queries": []}
STATE = {"garbage": False}


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, status, body, content_type="application/json", extra=None):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def refuse(self, status, error, description):
        with LOCK:
            STATS["refused"] += 1
        self.send(status, json.dumps({"error": error, "error_description": description}))

    def issue(self, source, audience, client_id):
        token = "%s.%s" % (source, secrets.token_urlsafe(32))
        expires_at = time.time() + OPTS.ttl
        with LOCK:
            TOKENS[token] = (source, audience, client_id, expires_at)
            STATS["calls"][source] = STATS["calls"].get(source, 0) + 1
        return token, expires_at

    def do_POST(self):
        if self.path == "/test/garbage":
            STATE["garbage"] = True
        elif self.path == "/test/good":
            STATE["garbage"] = False
        else:
            return self.send(404, "{}")
        self.send(200, "{}")

    def do_GET(self):
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        path = unquote(url.path)
        if path == "/test/stats":
            with LOCK:
                return self.send(200, json.dumps(STATS))
        if path.startswith("/api/"):
            header = self.headers.get("Authorization", "")
            entry = TOKENS.get(header[7:]) if header.startswith("Bearer ") else None
            if entry is None or entry[3] <= time.time():
                return self.send(401, '{"error":"invalid_token"}', extra={"WWW-Authenticate": "Bearer"})
            return self.send(200, json.dumps({"source": entry[0], "audience": entry[1], "client_id": entry[2]}))
        prefix = "/computeMetadata/v1/instance/service-accounts/"
        if path.startswith(prefix):
            if self.headers.get("Metadata-Flavor") != "Google":
                return self.refuse(403, "forbidden", "Missing Metadata-Flavor:Google header.")
            account, _, what = path[len(prefix):].partition("/")
            if account not in ("default", OPTS.account):
                return self.send(404, "not found", "text/plain")
            with LOCK:
                STATS["queries"].append(query)
            google = {} if OPTS.no_flavor else {"Metadata-Flavor": "Google"}
            if what == "token":
                token, _ = self.issue("gce", query.get("scopes"), None)
                if STATE["garbage"]:
                    return self.send(200, "<html>captive portal</html>", "text/html", google)
                return self.send(200, json.dumps({"access_token": token, "expires_in": OPTS.ttl, "token_type": "Bearer"}), extra=google)
            if what == "identity":
                audience = query.get("audience")
                if not audience:
                    return self.send(400, "non-empty audience parameter required", "text/plain", google)
                _, expires_at = self.issue("gce_id", audience, None)
                now = int(time.time())
                claims = {"iss": "https://accounts.google.com", "aud": audience, "sub": "1234567890",
                          "iat": now, "exp": int(expires_at)}
                jwt = "%s.%s.%s" % (b64(b'{"alg":"RS256","typ":"JWT"}'), b64(json.dumps(claims).encode()), b64(b"sig"))
                with LOCK:
                    TOKENS[jwt] = ("gce_id", audience, None, expires_at)
                return self.send(200, jwt, "text/plain", google)
            return self.send(404, "not found", "text/plain")
        if path == "/metadata/identity/oauth2/token":
            if self.headers.get("Metadata") != "true":
                return self.refuse(400, "invalid_request", "Required metadata header not specified")
            if query.get("api-version") != "2018-02-01" or not query.get("resource"):
                return self.refuse(400, "invalid_request", "api-version and resource are required")
            return self.azure("imds", query)
        if path == "/msi/token":
            if not OPTS.identity_header or self.headers.get("X-IDENTITY-HEADER") != OPTS.identity_header:
                return self.refuse(401, "unauthorized", "X-IDENTITY-HEADER missing or wrong")
            if query.get("api-version") != "2019-08-01" or not query.get("resource"):
                return self.refuse(400, "invalid_request", "api-version and resource are required")
            return self.azure("appservice", query)
        self.send(404, "{}")

    def azure(self, source, query):
        with LOCK:
            STATS["queries"].append(query)
        token, expires_at = self.issue(source, query["resource"], query.get("client_id"))
        if STATE["garbage"]:
            return self.send(200, '{"access_token": 7}')
        self.send(200, json.dumps({
            "access_token": token, "expires_in": str(OPTS.ttl), "expires_on": str(int(expires_at)),
            "not_before": str(int(time.time())), "resource": query["resource"], "token_type": "Bearer",
            "client_id": query.get("client_id") or "system-assigned"}))


def main():
    global OPTS
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--ttl", type=int, default=3600)
    p.add_argument("--identity-header")
    p.add_argument("--account", default="default")
    p.add_argument("--no-flavor", action="store_true")
    OPTS = p.parse_args()
    httpd = ThreadingHTTPServer(("127.0.0.1", OPTS.port), Handler)
    print("READY %d" % httpd.server_address[1], flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    main()

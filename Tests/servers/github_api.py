#!/usr/bin/env python3
"""A GitHub API fake for tokenproxy's github_app tests: the installation token call as GitHub
documents it ("Authenticating as a GitHub App installation"), checked as strictly as GitHub does,
and a protected API path. Prints `READY <port>`.

  POST /app/installations/ID/access_tokens
      Authorization: Bearer <app JWT>. The JWT is verified with the app's public key (RS256 only,
      PyJWT), `iss` must be --app-id, `iat` in the past (at least 30 s: the client backdates it),
      `exp` in the future, at most 10 minutes after `iat` and at most 10 minutes from now (GitHub's
      rule). Also required: `Accept: application/vnd.github+json`, `X-GitHub-Api-Version:
      2022-11-28`, a `User-Agent`. ID must be --installation-id (else 404 "Not Found").
      The body, when any, must be a JSON object; its `repositories` and `permissions` are recorded.
      Answers 201 {"token": "ghs_…", "expires_at": RFC 3339, "permissions", "repository_selection"}.
      A refused JWT: 401 {"message": …, "documentation_url": …}, as GitHub answers.
  GET /api/...   the protected API: 200 {"path", "token_number"} for a currently valid installation
                 token in `Authorization: Bearer` or `Authorization: token`, else 401 {"message": "Bad credentials"}.

Test controls:
  POST /test/refuse?message=TEXT   every later mint answers 401 with that message
  POST /test/accept                mints work again
  POST /test/ttl?seconds=N         later tokens live N seconds (default --ttl)
  POST /test/public-key            the body is the app's new public key (PEM); the old one no longer verifies
  POST /test/revoke                every token issued so far is no longer valid (the API answers 401)
  POST /test/clock?offset=S        this GitHub's clock (its checks, its Date header, expires_at) runs S seconds from ours
  POST /test/hold                  the next mint waits (up to 60 s) until POST /test/release
  POST /test/release
  GET  /test/stats   {"mints": successful mints, "attempts": token calls, "rejected": {reason: n},
                      "bodies": [each mint's JSON body], "held_now": n, "valid_tokens": n,
                      "api": {"ok": n, "unauthorized": n}, "secrets": [every JWT received and token issued],
                      "last_token": the newest token}
"""
import argparse
import json
import secrets
import threading
import time
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote_plus

import jwt  # PyJWT 2.x
from cryptography.hazmat.primitives.serialization import load_pem_public_key

import serving

LOCK = threading.Lock()
RELEASE = threading.Event()
OPTS = None
STATE = {"refuse": None, "ttl": None, "public_key": None, "hold": False, "offset": 0}
TOKENS = {}  # token -> (number, expires_at)
STATS = {
    "mints": 0,
    "attempts": 0,
    "rejected": {},
    "bodies": [],
    "held_now": 0,
    "api": {"ok": 0, "unauthorized": 0},
    "secrets": [],
    "last_token": None,
}
DOCS = "https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app"


def now():
    """This GitHub's clock: ours moved by POST /test/clock."""
    return time.time() + STATE["offset"]


def rfc3339(epoch):
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def date_time_string(self, timestamp=None):
        return super().date_time_string(now() if timestamp is None else timestamp)

    def send(self, status, body):
        serving.send_json(self, status, body, "application/json; charset=utf-8")

    def body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def reject(self, status, reason, message):
        with LOCK:
            STATS["rejected"][reason] = STATS["rejected"].get(reason, 0) + 1
        self.send(status, {"message": message, "documentation_url": DOCS})

    # --- the token call -------------------------------------------------------------------------

    def mint(self, installation):
        raw = self.body()
        with LOCK:
            STATS["attempts"] += 1
            hold = STATE["hold"]
            STATE["hold"] = False
            if hold:
                STATS["held_now"] += 1
        if hold:
            RELEASE.wait(60)
            RELEASE.clear()
            with LOCK:
                STATS["held_now"] -= 1
        auth = self.headers.get("Authorization", "")
        if not auth.startswith("Bearer "):
            return self.reject(401, "no_jwt", "A JSON web token could not be decoded")
        token = auth[len("Bearer "):]
        with LOCK:
            STATS["secrets"].append(token)
        if self.headers.get("Accept") != "application/vnd.github+json":
            return self.reject(415, "accept", "Unsupported 'Accept' header")
        if self.headers.get("X-GitHub-Api-Version") != "2022-11-28":
            return self.reject(400, "api_version", "Invalid API version")
        if not self.headers.get("User-Agent"):
            return self.reject(403, "user_agent", "Request forbidden by administrative rules. Please make sure your request has a User-Agent header")
        if STATE["refuse"] is not None:
            return self.reject(401, "refused", STATE["refuse"])
        clock = now()
        try:
            claims = jwt.decode(
                token,
                STATE["public_key"],
                algorithms=["RS256"],
                options={"require": ["iat", "exp", "iss"], "verify_iat": False},
                leeway=0,
            )
        except jwt.ExpiredSignatureError:
            return self.reject(401, "expired", "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires")
        except jwt.InvalidTokenError as error:
            return self.reject(401, "signature", "A JSON web token could not be decoded (%s)" % type(error).__name__)
        iat, exp = claims["iat"], claims["exp"]
        if str(claims["iss"]) != OPTS.app_id:
            return self.reject(401, "iss", "Integration not found")
        if not isinstance(iat, int) or not isinstance(exp, int):
            return self.reject(401, "numeric", "'Issued at' and 'Expiration time' must be integers")
        if iat > clock - 30:
            return self.reject(401, "iat", "'Issued at' claim ('iat') must be an Integer representing a time in the past")
        if exp - iat > 600 or exp > clock + 600:
            return self.reject(401, "exp", "'Expiration time' claim ('exp') is too far in the future")
        if installation != OPTS.installation_id:
            return self.reject(404, "installation", "Not Found")
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            return self.reject(400, "body", "Problems parsing JSON")
        if not isinstance(body, dict):
            return self.reject(400, "body", "Problems parsing JSON")
        ttl = STATE["ttl"] if STATE["ttl"] is not None else OPTS.ttl
        issued = "ghs_" + secrets.token_urlsafe(27)
        expires_at = int(clock + ttl)
        with LOCK:
            STATS["mints"] += 1
            number = STATS["mints"]
            TOKENS[issued] = (number, expires_at)
            STATS["bodies"].append(body)
            STATS["secrets"].append(issued)
            STATS["last_token"] = issued
        answer = {
            "token": issued,
            "expires_at": rfc3339(expires_at),
            "permissions": body.get("permissions", {"contents": "write", "metadata": "read"}),
            "repository_selection": "selected" if "repositories" in body else "all",
        }
        if "repositories" in body:
            answer["repositories"] = [{"name": name} for name in body["repositories"]]
        self.send(201, answer)

    # --- the protected API ----------------------------------------------------------------------

    def api(self):
        auth = self.headers.get("Authorization", "")
        scheme, _, token = auth.partition(" ")
        with LOCK:
            entry = TOKENS.get(token) if scheme in ("Bearer", "token") else None
            valid = entry is not None and entry[1] > now()
            STATS["api"]["ok" if valid else "unauthorized"] += 1
        if not valid:
            return self.send(401, {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"})
        self.send(200, {"path": self.path, "token_number": entry[0], "scheme": scheme})

    # --- routing --------------------------------------------------------------------------------

    def do_GET(self):
        if self.path.startswith("/api/"):
            return self.api()
        if self.path == "/test/stats":
            with LOCK:
                clock = now()
                stats = dict(STATS)
                stats["valid_tokens"] = sum(1 for _, expires_at in TOKENS.values() if expires_at > clock)
                return self.send(200, stats)
        self.send(404, {"message": "Not Found"})

    def do_POST(self):
        path, _, query = self.path.partition("?")
        parts = path.strip("/").split("/")
        if len(parts) == 4 and parts[0] == "app" and parts[1] == "installations" and parts[3] == "access_tokens":
            return self.mint(parts[2])
        if path.startswith("/api/"):
            self.body()
            return self.api()
        params = dict(item.partition("=")[::2] for item in query.split("&") if item)
        raw = self.body()
        with LOCK:
            if path == "/test/refuse":
                STATE["refuse"] = unquote_plus(params.get("message", "Bad credentials"))
            elif path == "/test/accept":
                STATE["refuse"] = None
            elif path == "/test/ttl":
                STATE["ttl"] = int(params["seconds"])
            elif path == "/test/public-key":
                STATE["public_key"] = load_pem_public_key(raw)
            elif path == "/test/revoke":
                for token, (number, _) in list(TOKENS.items()):
                    TOKENS[token] = (number, 0)
            elif path == "/test/clock":
                STATE["offset"] = int(params["offset"])
            elif path == "/test/hold":
                RELEASE.clear()
                STATE["hold"] = True
            elif path == "/test/release":
                RELEASE.set()
            else:
                return self.send(404, {"message": "Not Found"})
        self.send(200, {})


def main():
    global OPTS
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--public-key", required=True, help="the app's public key (PEM file)")
    parser.add_argument("--app-id", required=True)
    parser.add_argument("--installation-id", required=True)
    parser.add_argument("--ttl", type=int, default=3600)
    OPTS = parser.parse_args()
    with open(OPTS.public_key, "rb") as f:
        STATE["public_key"] = load_pem_public_key(f.read())
    server = ThreadingHTTPServer(("127.0.0.1", OPTS.port), Handler)
    server.daemon_threads = True
    print("READY %d" % server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()

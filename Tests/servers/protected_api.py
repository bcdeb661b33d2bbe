#!/usr/bin/env python3
"""The upstream API of the token life cycle tests: it checks every bearer token for real.

Run with `--port 0`: prints `READY <port>` on stdout once listening on 127.0.0.1. Token check, one of:

  --jwt-key KEY | --jwt-key-file PATH   the token must be an HS256 JWT signed with this key (the
                       same key as oauth_server.py --jwt) whose `exp` has not passed (no leeway);
                       checked locally with joserfc
  --jwks-url URL       the token must be an RS256 JWT signed by a key of this JWKS (fetched once at
                       start), unexpired; for cognito_idp.py: ENDPOINT/POOL_ID/.well-known/jwks.json.
                       `sub` in the answer is the token's `username` claim when it has one
  --introspection-url URL --introspection-client ID:SECRET
                       opaque tokens: each request asks the authorization server (RFC 7662,
                       client_secret_basic); the token must be `active`

Every other path and method: 200 with JSON {"path", "query", "method", "sub", "body_sha256",
"body_len", "authorization_seen": true} (the token itself is never echoed), or 401 with
`WWW-Authenticate: Bearer error="invalid_token"` (or `Bearer realm="api"` when no token came).

Test-only controls:
  GET  /test/stats     {"requests", "ok", "unauthorized", "reasons": {reason: n}, "expired_tokens_seen",
                       "max_exp_overshoot_seconds", "distinct_tokens", "subjects": {sub: n},
                       "max_concurrent"}; reasons: missing, malformed, bad_signature, expired,
                       inactive, rejected
  POST /test/reset-stats
  POST /test/reject?count=N   the next N requests get 401 even with a good token (N=-1: until
                       POST /test/accept) — an upstream that refuses good tokens
  POST /test/reject-seen      every token presented so far is refused from now on (server-side
                       invalidation: the proxy's current token gets 401, a refreshed one passes)
  POST /test/accept           undo both
"""
import argparse
import base64
import hashlib
import json
import sys
import threading
import time
import urllib.parse
import urllib.request
import warnings

from flask import Flask, jsonify, request

import serving

LOCK = threading.RLock()
OPTS = None
STATS = {}
STATE = {"reject": 0, "rejected_tokens": set(), "inflight": 0}
SEEN = set()  # sha256 of every token presented

app = Flask(__name__)


def reset_stats():
    STATS.clear()
    STATS.update({
        "requests": 0, "ok": 0, "unauthorized": 0, "reasons": {}, "expired_tokens_seen": 0,
        "max_exp_overshoot_seconds": 0.0, "distinct_tokens": 0, "subjects": {}, "max_concurrent": 0,
    })
    SEEN.clear()


def check_jwt(token):
    """(sub, None) or (None, reason)."""
    from joserfc import jwt
    from joserfc.errors import JoseError
    try:
        decoded = jwt.decode(token, OPTS.verify_key, algorithms=OPTS.algorithms)
    except (JoseError, ValueError) as e:
        return None, ("bad_signature" if "signature" in str(e).lower() else "malformed")
    except Exception:
        return None, "malformed"
    claims = decoded.claims
    exp = claims.get("exp")
    if not isinstance(exp, (int, float)):
        return None, "malformed"
    now = time.time()
    if now >= exp:
        with LOCK:
            STATS["expired_tokens_seen"] += 1
            STATS["max_exp_overshoot_seconds"] = max(STATS["max_exp_overshoot_seconds"], round(now - exp, 3))
        return None, "expired"
    return str(claims.get("username") or claims.get("sub")), None


def check_introspection(token):
    body = ("token=" + urllib.parse.quote(token) + "&token_type_hint=access_token").encode()
    req = urllib.request.Request(OPTS.introspection_url, data=body, method="POST")
    req.add_header("Content-Type", "application/x-www-form-urlencoded")
    req.add_header("Authorization", "Basic " + base64.b64encode(OPTS.introspection_client.encode()).decode())
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(req, timeout=10) as resp:
        info = json.loads(resp.read())
    if not info.get("active"):
        exp = info.get("exp")
        if isinstance(exp, (int, float)) and time.time() >= exp:
            return None, "expired"
        return None, "inactive"
    return str(info.get("sub")), None


def unauthorized(reason):
    with LOCK:
        STATS["unauthorized"] += 1
        STATS["reasons"][reason] = STATS["reasons"].get(reason, 0) + 1
    resp = jsonify({"error": "invalid_token", "reason": reason})
    resp.status_code = 401
    if reason == "missing":
        resp.headers["WWW-Authenticate"] = 'Bearer realm="api"'
    else:
        resp.headers["WWW-Authenticate"] = 'Bearer realm="api", error="invalid_token"'
    return resp


@app.route("/", defaults={"path": ""}, methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])
@app.route("/<path:path>", methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])
def api(path):
    with LOCK:
        STATE["inflight"] += 1
        STATS["max_concurrent"] = max(STATS["max_concurrent"], STATE["inflight"])
        STATS["requests"] += 1
    try:
        return handle()
    finally:
        with LOCK:
            STATE["inflight"] -= 1


def handle():
    body = request.get_data()
    auth = request.headers.get("Authorization", "")
    if not auth:
        return unauthorized("missing")
    scheme, _, token = auth.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return unauthorized("malformed")
    digest = hashlib.sha256(token.encode()).hexdigest()
    with LOCK:
        if digest not in SEEN:
            SEEN.add(digest)
            STATS["distinct_tokens"] += 1
    if OPTS.verify_key is not None:
        sub, reason = check_jwt(token)
    else:
        sub, reason = check_introspection(token)
    if reason:
        return unauthorized(reason)
    with LOCK:
        if digest in STATE["rejected_tokens"]:
            reject = True
        elif STATE["reject"] != 0:
            reject = True
            if STATE["reject"] > 0:
                STATE["reject"] -= 1
        else:
            reject = False
    if reject:
        return unauthorized("rejected")
    with LOCK:
        STATS["ok"] += 1
        STATS["subjects"][sub] = STATS["subjects"].get(sub, 0) + 1
    return jsonify({
        "path": request.path, "query": request.query_string.decode("latin-1"), "method": request.method,
        "sub": sub, "body_sha256": hashlib.sha256(body).hexdigest(), "body_len": len(body),
        "authorization_seen": True,
    })


serving.add_test_controls(app, LOCK, reset_stats, stats=STATS)


@app.post("/test/reject")
def test_reject():
    with LOCK:
        STATE["reject"] = int(request.args.get("count", "-1"))
    return jsonify({"ok": True})


@app.post("/test/reject-seen")
def test_reject_seen():
    with LOCK:
        STATE["rejected_tokens"] |= SEEN
    return jsonify({"ok": True})


@app.post("/test/accept")
def test_accept():
    with LOCK:
        STATE["reject"] = 0
        STATE["rejected_tokens"] = set()
    return jsonify({"ok": True})


def main():
    global OPTS
    warnings.filterwarnings("ignore", message="Key size")
    p = argparse.ArgumentParser(description="token-checking upstream API for tests")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--jwt-key")
    p.add_argument("--jwt-key-file")
    p.add_argument("--jwks-url")
    p.add_argument("--introspection-url")
    p.add_argument("--introspection-client", default="app:secret")
    p.add_argument("--verbose", action="store_true")
    OPTS = p.parse_args()
    from joserfc.jwk import KeySet, OctKey
    OPTS.verify_key = None
    OPTS.algorithms = ["HS256"]
    if OPTS.jwt_key is not None:
        OPTS.verify_key = OctKey.import_key(OPTS.jwt_key.encode())
    elif OPTS.jwt_key_file:
        with open(OPTS.jwt_key_file, "rb") as f:
            OPTS.verify_key = OctKey.import_key(f.read().strip())
    elif OPTS.jwks_url:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(OPTS.jwks_url, timeout=10) as resp:
            OPTS.verify_key = KeySet.import_key_set(json.loads(resp.read()))
        OPTS.algorithms = ["RS256"]
    elif not OPTS.introspection_url:
        sys.exit("protected_api: give --jwt-key/--jwt-key-file, --jwks-url or --introspection-url")
    reset_stats()
    serving.announce_and_serve(serving.wsgi_server(app, OPTS.port, OPTS.verbose))


if __name__ == "__main__":
    serving.exit_at_once_on_sigterm()
    main()

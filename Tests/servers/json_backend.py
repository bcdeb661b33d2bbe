#!/usr/bin/env python3
"""A backend with its own JSON login and refresh calls (tokenproxy's `json_refresh` credentials),
which is also the protected API itself under /api/.

Run with `--port 0`: prints `READY <port>` on stdout once listening on 127.0.0.1. Flags:

  --user NAME:PASS        accepted logins (repeatable; default alice:wonderland)
  --access-ttl S          access token lifetime (default 20)
  --refresh-ttl S         refresh token lifetime (default 86400; 0 = never expires)
  --refresh-in header|body   header: POST /auth/refresh with `Authorization: Bearer <refresh token>`
                          and an empty body (default); body: JSON {"refresh_token": …}
  --access-token-path P   dotted paths where the answers put the tokens (defaults access_token,
  --refresh-token-path P  refresh_token, expires_in), e.g. data.token builds {"data": {"token": …}}
  --expires-in-path P
  --expires-at-path P     put an absolute expiry there instead of expires_in
  --expires-at-format epoch|rfc3339   (default epoch)
  --no-expiry             answers carry neither expires_in nor expires_at
  --jwt                   access tokens are HS256 JWTs (exp, iat, sub, jti) signed with --jwt-key
                          (default: opaque random strings)
  --jwt-key KEY
  --no-rotate             a refresh answer carries no new refresh token; the old one stays valid
                          (default: rotation, the used refresh token is dead: reuse gives 401)
  --token-delay-ms N      login and refresh sleep N ms first (concurrent callers overlap)

Endpoints:
  POST /auth/login        {"username","password"} -> 200 the token pair; 401 {"error":"invalid_credentials"}
  POST /auth/refresh      -> 200 a new pair; 401 {"error":"invalid_refresh_token"} for an unknown,
                          expired, revoked or already used refresh token
  ANY  /api/...           checks the access token (unknown or expired: 401 with
                          `WWW-Authenticate: Bearer error="invalid_token"`); 200 JSON {"path", "query",
                          "method", "sub", "body_sha256", "body_len", "authorization_seen": true}

Test-only controls:
  GET  /test/stats        {"calls": {"login"|"refresh": {outcome: n}}, "token_calls", "max_concurrent",
                          "reuse_detected", "api_requests", "api_ok", "api_unauthorized",
                          "expired_tokens_seen", "max_exp_overshoot_seconds", "last_refresh":
                          {"content_length", "content_type", "authorization_scheme", "body"}};
                          outcome: ok, refused, bad_request, injected, down
  POST /test/reset-stats
  POST /test/fail?status=503&count=N[&raw=TEXT]   the next N login/refresh calls fail
  POST /test/down, /test/up
  POST /test/revoke-all[?access=1]   every refresh token (and access token) becomes invalid
"""
import argparse
import hashlib
import json
import secrets
import sys
import threading
import time
import warnings
from datetime import datetime, timezone

from flask import Flask, jsonify, request

import serving

LOCK = threading.RLock()
OPTS = None
STATS = {}
STATE = {"down": False, "fail_count": 0, "fail_status": 503, "fail_raw": None, "inflight": 0}
USERS = {}
ACCESS = {}   # access token -> {"sub", "exp", "revoked"}
REFRESH = {}  # refresh token -> {"sub", "exp", "used", "revoked"}

app = Flask(__name__)


def reset_stats():
    STATS.clear()
    STATS.update({
        "calls": {}, "token_calls": 0, "max_concurrent": 0, "reuse_detected": 0,
        "api_requests": 0, "api_ok": 0, "api_unauthorized": 0, "expired_tokens_seen": 0,
        "max_exp_overshoot_seconds": 0.0, "last_refresh": None,
    })


def count(kind, outcome):
    with LOCK:
        by = STATS["calls"].setdefault(kind, {})
        by[outcome] = by.get(outcome, 0) + 1
        STATS["token_calls"] += 1


def put(obj, path, value):
    keys = path.split(".")
    for key in keys[:-1]:
        obj = obj.setdefault(key, {})
    obj[keys[-1]] = value


def new_access(sub):
    now = time.time()
    exp = now + OPTS.access_ttl
    if OPTS.jwt:
        from joserfc import jwt
        from joserfc.jwk import OctKey
        token = jwt.encode({"alg": "HS256"}, {"sub": sub, "iat": int(now), "exp": int(exp),
                                              "jti": secrets.token_hex(8)}, OctKey.import_key(OPTS.jwt_key.encode()))
        exp = int(exp)
    else:
        token = "at-" + secrets.token_urlsafe(24)
    ACCESS[token] = {"sub": sub, "exp": exp, "revoked": False}
    return token, exp


def issue(sub, refresh_token=None):
    """The JSON answer with a new access token and (when refresh_token is None) a new refresh token."""
    access, exp = new_access(sub)
    if refresh_token is None:
        refresh_token = "rt-" + secrets.token_urlsafe(32)
        REFRESH[refresh_token] = {"sub": sub, "used": False, "revoked": False,
                                  "exp": time.time() + OPTS.refresh_ttl if OPTS.refresh_ttl > 0 else None}
        include_refresh = True
    else:
        include_refresh = False
    out = {}
    put(out, OPTS.access_token_path, access)
    if include_refresh:
        put(out, OPTS.refresh_token_path, refresh_token)
    if not OPTS.no_expiry:
        if OPTS.expires_at_path:
            if OPTS.expires_at_format == "rfc3339":
                value = datetime.fromtimestamp(int(exp), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            else:
                value = int(exp)
            put(out, OPTS.expires_at_path, value)
        else:
            put(out, OPTS.expires_in_path, OPTS.access_ttl)
    put(out, "token_type", "Bearer")
    return out


def begin():
    with LOCK:
        STATE["inflight"] += 1
        STATS["max_concurrent"] = max(STATS["max_concurrent"], STATE["inflight"])
    if OPTS.token_delay_ms:
        time.sleep(OPTS.token_delay_ms / 1000.0)


def end():
    with LOCK:
        STATE["inflight"] -= 1


def injected(kind):
    """An injected failure response, or None. Called under LOCK."""
    if STATE["down"]:
        return ("down", jsonify({"error": "unavailable"}), 503)
    if STATE["fail_count"] > 0:
        STATE["fail_count"] -= 1
        if STATE["fail_raw"] is not None:
            return ("injected", app.response_class(STATE["fail_raw"], mimetype="text/plain"), STATE["fail_status"])
        return ("injected", jsonify({"error": "injected failure"}), STATE["fail_status"])
    return None


@app.post("/auth/login")
def login():
    begin()
    try:
        with LOCK:
            failure = injected("login")
            if failure is None:
                body = request.get_json(silent=True)
                if not isinstance(body, dict) or not isinstance(body.get("username"), str) \
                        or not isinstance(body.get("password"), str):
                    outcome, resp, status = "bad_request", jsonify({"error": "bad_request"}), 400
                elif USERS.get(body["username"]) != body["password"]:
                    outcome, resp, status = "refused", jsonify({"error": "invalid_credentials"}), 401
                else:
                    outcome, resp, status = "ok", jsonify(issue(str(body["username"]))), 200
            else:
                outcome, resp, status = failure
        count("login", outcome)
        resp.status_code = status
        return resp
    finally:
        end()


@app.post("/auth/refresh")
def refresh():
    begin()
    try:
        raw = request.get_data()
        auth = request.headers.get("Authorization", "")
        with LOCK:
            STATS["last_refresh"] = {
                "content_length": len(raw), "content_type": request.headers.get("Content-Type"),
                "authorization_scheme": auth.split(" ", 1)[0] if auth else None,
                "body": raw[:200].decode("utf-8", "replace") if OPTS.refresh_in == "body" else None,
            }
            failure = injected("refresh")
            if failure is not None:
                outcome, resp, status = failure
            else:
                token = None
                if OPTS.refresh_in == "header":
                    scheme, _, value = auth.partition(" ")
                    if scheme.lower() == "bearer" and value.strip():
                        token = value.strip()
                else:
                    try:
                        body = json.loads(raw or b"null")
                    except ValueError:
                        body = None
                    if isinstance(body, dict) and isinstance(body.get("refresh_token"), str):
                        token = body["refresh_token"]
                record = REFRESH.get(token) if token else None
                if token is None:
                    outcome, resp, status = "bad_request", jsonify({"error": "missing_refresh_token"}), 401
                elif record is None or record["revoked"] or (record["exp"] is not None and time.time() >= record["exp"]):
                    outcome, resp, status = "refused", jsonify({"error": "invalid_refresh_token"}), 401
                elif record["used"]:
                    STATS["reuse_detected"] += 1
                    outcome, resp, status = "refused", jsonify({"error": "invalid_refresh_token"}), 401
                else:
                    if OPTS.rotate:
                        record["used"] = True
                        answer = issue(record["sub"])
                    else:
                        answer = issue(record["sub"], refresh_token=token)
                    outcome, resp, status = "ok", jsonify(answer), 200
        count("refresh", outcome)
        resp.status_code = status
        return resp
    finally:
        end()


def api_unauthorized():
    with LOCK:
        STATS["api_unauthorized"] += 1
    resp = jsonify({"error": "invalid_token"})
    resp.status_code = 401
    resp.headers["WWW-Authenticate"] = 'Bearer realm="api", error="invalid_token"'
    return resp


@app.route("/api", defaults={"rest": ""}, methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])
@app.route("/api/<path:rest>", methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"])
def api(rest):
    body = request.get_data()
    with LOCK:
        STATS["api_requests"] += 1
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    token = token.strip()
    with LOCK:
        record = ACCESS.get(token) if scheme.lower() == "bearer" else None
        if record is None or record["revoked"]:
            return api_unauthorized()
        now = time.time()
        if now >= record["exp"]:
            STATS["expired_tokens_seen"] += 1
            STATS["max_exp_overshoot_seconds"] = max(STATS["max_exp_overshoot_seconds"], round(now - record["exp"], 3))
            return api_unauthorized()
        STATS["api_ok"] += 1
    return jsonify({
        "path": request.path, "query": request.query_string.decode("latin-1"), "method": request.method,
        "sub": record["sub"], "body_sha256": hashlib.sha256(body).hexdigest(), "body_len": len(body),
        "authorization_seen": True,
    })


@app.get("/test/stats")
def test_stats():
    with LOCK:
        return jsonify(json.loads(json.dumps(STATS)))


serving.add_test_controls(app, LOCK, reset_stats, STATE)


@app.post("/test/fail")
def test_fail():
    with LOCK:
        STATE["fail_status"] = int(request.args.get("status", "503"))
        STATE["fail_count"] = int(request.args.get("count", "1"))
        STATE["fail_raw"] = request.args.get("raw")
    return jsonify({"ok": True})


@app.post("/test/revoke-all")
def test_revoke_all():
    with LOCK:
        for record in REFRESH.values():
            record["revoked"] = True
        if request.args.get("access") in ("1", "true", "yes"):
            for record in ACCESS.values():
                record["revoked"] = True
    return jsonify({"ok": True})


def main():
    global OPTS
    p = argparse.ArgumentParser(description="JSON login/refresh backend for tests")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--user", action="append", default=[])
    p.add_argument("--access-ttl", type=int, default=20)
    p.add_argument("--refresh-ttl", type=int, default=86400)
    p.add_argument("--refresh-in", choices=["header", "body"], default="header")
    p.add_argument("--access-token-path", default="access_token")
    p.add_argument("--refresh-token-path", default="refresh_token")
    p.add_argument("--expires-in-path", default="expires_in")
    p.add_argument("--expires-at-path")
    p.add_argument("--expires-at-format", choices=["epoch", "rfc3339"], default="epoch")
    p.add_argument("--no-expiry", action="store_true")
    p.add_argument("--jwt", action="store_true")
    p.add_argument("--jwt-key", default="json-backend-test-key-0123456789")
    p.add_argument("--rotate", dest="rotate", action="store_true", default=True)
    p.add_argument("--no-rotate", dest="rotate", action="store_false")
    p.add_argument("--token-delay-ms", type=int, default=0)
    p.add_argument("--verbose", action="store_true")
    OPTS = p.parse_args()
    for spec in OPTS.user or ["alice:wonderland"]:
        name, _, password = spec.partition(":")
        USERS[name] = password
    warnings.filterwarnings("ignore", message="Key size")
    reset_stats()
    serving.announce_and_serve(serving.wsgi_server(app, OPTS.port, OPTS.verbose))


if __name__ == "__main__":
    serving.exit_at_once_on_sigterm()
    main()

#!/usr/bin/env python3
"""A real OAuth 2.0 authorization server for tokenproxy's tests, built on Authlib's
AuthorizationServer, grant classes, RevocationEndpoint, IntrospectionEndpoint and
DeviceAuthorizationEndpoint (Flask integration). In-memory storage, one process.

Run with `--port 0`: prints `READY <port>` on stdout once listening on 127.0.0.1, nothing else on
stdout. Flags:

  --client ID:SECRET   a confidential client (client_secret_basic and client_secret_post both
                       accepted); --client ID (no colon) is a public client (auth method none).
                       Repeatable; default `app:secret`. Every client may use every grant.
  --user NAME:PASS     a resource owner for the password grant (repeatable; default alice:wonderland)
  --access-ttl S       access token lifetime (default 20)
  --refresh-ttl S      refresh token lifetime, counted from each refresh token's issue (default
                       86400; 0 = never expires)
  --jwt                access tokens are HS256 JWTs (claims iss, sub, aud, exp, iat, jti, client_id,
                       scope); key from --jwt-key or --jwt-key-file (the protected API gets the same)
  --no-expires-in      leave `expires_in` out of token responses (JWT exp / default_lifetime tests)
  --rotate / --no-rotate   every refresh_token grant issues a new refresh token and invalidates the
                       old one (default on). Reuse of an already rotated refresh token revokes its
                       whole family (all access and refresh tokens descending from one login) and
                       answers invalid_grant. With --no-rotate the refresh answer has no
                       refresh_token and the old one stays valid.
  --token-delay-ms N   every token-endpoint call sleeps N ms before it is processed (outside the
                       server's lock, so concurrent callers really overlap)
  --device-interval S  RFC 8628 polling interval (default 1); polling faster than 0.8 x interval
                       answers slow_down (and adds 5 s to that code's interval) unless
                       --no-enforce-interval
  --device-expires S   device code lifetime (default 600)
  --issuer URL         issuer in discovery and JWTs (default http://127.0.0.1:PORT)
  --verbose            request log on stderr

Endpoints:
  POST /oauth/token            grants: password, refresh_token, client_credentials,
                               urn:ietf:params:oauth:grant-type:device_code
  POST /oauth/device           RFC 8628 device authorization
  POST /oauth/revoke           RFC 7009 (access or refresh token; revoking a refresh token revokes
                               its family)
  POST /oauth/introspect       RFC 7662 (any registered client may introspect any token)
  GET  /.well-known/openid-configuration (also /.well-known/oauth-authorization-server)
  GET  /device                 a stub verification page (the tests approve with /test/approve)

Test-only controls:
  GET  /test/stats             {"calls": {grant_type: {outcome: n}}, "token_calls", "max_concurrent",
                               "device_authorizations", "revocations", "introspections",
                               "reuse_detected", "active_refresh_tokens"}; outcome is "ok", the
                               OAuth error code ("invalid_grant", "authorization_pending", ...),
                               "injected" (from /test/fail) or "down"
  POST /test/reset-stats       zero the counters
  POST /test/fail?status=503&count=N[&error=CODE][&raw=TEXT][&retry_after=S]
                               the next N token calls answer `status` (JSON {"error": CODE}, default
                               temporarily_unavailable, or the raw TEXT as the body)
  POST /test/down, /test/up    token, device and revocation endpoints answer 503 / work again
  POST /test/revoke-all[?access=1]   every refresh token (and with access=1 every access token) is
                               revoked: the next refresh is invalid_grant
  POST /test/approve           form, JSON or query: user_code, optional username (default: the first
                               user), optional deny=1; 404 for an unknown user_code
  POST /test/hold?count=N&when=before|after
                               the next N refresh_token calls are held until POST /test/release.
                               before: held before the grant is processed; a caller that disconnects
                               meanwhile (killed) is dropped unprocessed, counted as outcome
                               "abandoned" (its refresh token is not rotated). after: processed (the
                               token rotated), the answer held. /test/stats has "held_now", the calls
                               waiting at this moment
  POST /test/release           lets every held call go on
"""
import argparse
import json
import sys
import threading
import time

from flask import Flask, jsonify, request
from joserfc.jwk import OctKey

from authlib.common.security import generate_token
from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import grants
from authlib.oauth2.rfc6750 import BearerTokenGenerator
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7662 import IntrospectionEndpoint
from authlib.oauth2.rfc8628 import (
    DEVICE_CODE_GRANT_TYPE,
    DeviceAuthorizationEndpoint,
    DeviceCodeGrant,
    DeviceCredentialDict,
)
from authlib.oauth2.rfc9068 import JWTBearerTokenGenerator

import serving
from authlib_models import IssuedToken, RegisteredClient

ALL_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"]

# --- storage -----------------------------------------------------------------------------------

LOCK = threading.RLock()  # guards everything below; token requests are processed under it
OPTS = None


class User:
    def __init__(self, name, password):
        self.name = name
        self.password = password

    def get_user_id(self):
        return self.name


class Client(RegisteredClient):
    def __init__(self, client_id, secret):
        super().__init__(client_id)
        self.secret = secret  # None: public client

    def check_client_secret(self, client_secret):
        return self.secret is not None and client_secret == self.secret

    def check_endpoint_auth_method(self, method, endpoint):
        if self.secret is None:
            return method == "none"
        return method in ("client_secret_basic", "client_secret_post")



class Token(IssuedToken):
    """One token response: an access token and, maybe, a refresh token. `family` links every
    token descending from one login; `rotated` marks a refresh token that was already used."""

    def __init__(self, data, client_id, user, family):
        super().__init__(data, client_id, user, OPTS.access_ttl, CLIENTS)
        self.scope = data.get("scope", "")
        self.family = family
        self.access_revoked = False
        self.refresh_revoked = False
        self.rotated = False

    def get_scope(self):
        return self.scope

    def is_revoked(self):
        return self.access_revoked

    def refresh_expired(self):
        return OPTS.refresh_ttl > 0 and time.time() >= self.issued_at + OPTS.refresh_ttl


USERS = {}
CLIENTS = {}
TOKENS_BY_ACCESS = {}
TOKENS_BY_REFRESH = {}
DEVICE_CODES = {}  # device_code -> DeviceCredentialDict
USER_GRANTS = {}  # user_code -> (User, approved)
LAST_POLL = {}  # device_code -> (time, interval)

HOLD = {"count": 0, "when": "before", "now": 0}
RELEASE = threading.Event()
STATE = {"down": False, "fail_count": 0, "fail_status": 503, "fail_error": None, "fail_raw": None, "fail_retry_after": None}
STATS = {}
INFLIGHT = {"now": 0}


def reset_stats():
    STATS.clear()
    STATS.update({
        "calls": {}, "token_calls": 0, "max_concurrent": 0, "device_authorizations": 0,
        "revocations": 0, "introspections": 0, "reuse_detected": 0,
    })


def count_call(grant_type, outcome):
    with LOCK:
        by = STATS["calls"].setdefault(grant_type or "(none)", {})
        by[outcome] = by.get(outcome, 0) + 1
        STATS["token_calls"] += 1


def revoke_family(family):
    for tok in list(TOKENS_BY_ACCESS.values()):
        if tok.family == family:
            tok.access_revoked = True
            tok.refresh_revoked = True


def query_client(client_id):
    return CLIENTS.get(client_id)


def save_token(token, req):
    with LOCK:
        old = getattr(req, "refresh_token", None)  # set by the refresh grant
        family = old.family if isinstance(old, Token) else generate_token(16)
        user = req.user
        tok = Token(token, req.client.get_client_id(), user, family)
        TOKENS_BY_ACCESS[tok.access_token] = tok
        if tok.refresh_token:
            TOKENS_BY_REFRESH[tok.refresh_token] = tok


# --- grants ------------------------------------------------------------------------------------


class PasswordGrant(grants.ResourceOwnerPasswordCredentialsGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ALL_AUTH_METHODS

    def authenticate_user(self, username, password):
        user = USERS.get(username)
        if user and user.password == password:
            return user
        return None


class ClientCredentialsGrant(grants.ClientCredentialsGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post"]


class RefreshTokenGrant(grants.RefreshTokenGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ALL_AUTH_METHODS

    def authenticate_refresh_token(self, refresh_token):
        tok = TOKENS_BY_REFRESH.get(refresh_token)
        if tok is None:
            return None
        if tok.rotated:
            # Reuse of a rotated refresh token: somebody replayed it. Revoke the whole family.
            STATS["reuse_detected"] += 1
            revoke_family(tok.family)
            return None
        if tok.refresh_revoked or tok.refresh_expired():
            return None
        return tok

    def authenticate_user(self, refresh_token):
        return refresh_token.user

    def revoke_old_credential(self, refresh_token):
        if OPTS.rotate:
            refresh_token.rotated = True


class DeviceGrant(DeviceCodeGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ALL_AUTH_METHODS

    def query_device_credential(self, device_code):
        return DEVICE_CODES.get(device_code)

    def query_user_grant(self, user_code):
        return USER_GRANTS.get(user_code)

    def should_slow_down(self, credential):
        code = credential["device_code"]
        now = time.time()
        last, interval = LAST_POLL.get(code, (None, credential["interval"]))
        slow = OPTS.enforce_interval and last is not None and now - last < 0.8 * interval
        if slow:
            interval += 5
        LAST_POLL[code] = (now, interval)
        return slow

    def create_token_response(self):
        result = super().create_token_response()
        code = self.request.credential["device_code"]
        DEVICE_CODES.pop(code, None)  # a device code is good for one token response
        USER_GRANTS.pop(self.request.credential["user_code"], None)
        return result


class DeviceEndpoint(DeviceAuthorizationEndpoint):
    def get_verification_uri(self):
        return OPTS.issuer + "/device"

    def save_device_credential(self, client_id, scope, data):
        cred = DeviceCredentialDict(client_id=client_id, scope=scope, **data)
        cred["expires_at"] = time.time() + data["expires_in"]
        DEVICE_CODES[data["device_code"]] = cred


class Revocation(RevocationEndpoint):
    CLIENT_AUTH_METHODS = ALL_AUTH_METHODS

    def query_token(self, token_string, token_type_hint):
        if token_type_hint == "refresh_token":
            return TOKENS_BY_REFRESH.get(token_string) or TOKENS_BY_ACCESS.get(token_string)
        return TOKENS_BY_ACCESS.get(token_string) or TOKENS_BY_REFRESH.get(token_string)

    def revoke_token(self, token, req):
        STATS["revocations"] += 1
        if token.refresh_token and req.form.get("token") == token.refresh_token:
            revoke_family(token.family)  # RFC 7009 §2.1: also the access tokens of that grant
        else:
            token.access_revoked = True


class Introspection(IntrospectionEndpoint):
    CLIENT_AUTH_METHODS = ["client_secret_basic", "client_secret_post"]

    def query_token(self, token_string, token_type_hint):
        tok = TOKENS_BY_ACCESS.get(token_string)
        if tok is not None:
            return tok
        return None  # only access tokens are introspected here

    def check_permission(self, token, client, req):
        return True

    def introspect_token(self, token):
        sub = token.user.get_user_id() if token.user else token.client_id
        return {
            "active": True, "client_id": token.client_id, "token_type": "Bearer",
            "scope": token.scope, "sub": sub, "username": sub, "iss": OPTS.issuer,
            "exp": int(token.issued_at + token.expires_in), "iat": int(token.issued_at),
        }


class HS256Generator(JWTBearerTokenGenerator):
    def __init__(self, key, **kwargs):
        super().__init__(OPTS.issuer, alg="HS256", **kwargs)
        self._key = OctKey.import_key(key)

    def get_jwks(self):
        return self._key


# --- the app -----------------------------------------------------------------------------------

app = Flask(__name__)
server = AuthorizationServer()


def discovery():
    base = OPTS.issuer
    return jsonify({
        "issuer": base,
        "token_endpoint": base + "/oauth/token",
        "device_authorization_endpoint": base + "/oauth/device",
        "revocation_endpoint": base + "/oauth/revoke",
        "introspection_endpoint": base + "/oauth/introspect",
        "grant_types_supported": ["password", "refresh_token", "client_credentials", DEVICE_CODE_GRANT_TYPE],
        "token_endpoint_auth_methods_supported": ALL_AUTH_METHODS,
        "response_types_supported": [],
    })


app.add_url_rule("/.well-known/openid-configuration", "oidc", discovery)
app.add_url_rule("/.well-known/oauth-authorization-server", "oas", discovery)


def injected_failure():
    """The response of an injected failure (down or /test/fail), or None."""
    if STATE["down"]:
        resp = jsonify({"error": "temporarily_unavailable", "error_description": "down (test)"})
        resp.status_code = 503
        return resp, "down"
    if STATE["fail_count"] > 0:
        STATE["fail_count"] -= 1
        if STATE["fail_raw"] is not None:
            resp = app.response_class(STATE["fail_raw"], mimetype="text/plain")
        else:
            resp = jsonify({"error": STATE["fail_error"] or "temporarily_unavailable"})
        resp.status_code = STATE["fail_status"]
        if STATE["fail_retry_after"]:
            resp.headers["Retry-After"] = STATE["fail_retry_after"]
        return resp, "injected"
    return None, None


def outcome_of(resp):
    if resp.status_code == 200:
        return "ok"
    try:
        return json.loads(resp.get_data()).get("error") or "http_%d" % resp.status_code
    except Exception:
        return "http_%d" % resp.status_code


def client_gone():
    """True when the caller closed its connection (a killed process): the socket reads end of file."""
    import select
    import socket
    sock = request.environ.get("werkzeug.socket")
    if sock is None:
        return False
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def take_hold(grant_type):
    """The hold mode for this call ("before", "after") or None."""
    with LOCK:
        if grant_type != "refresh_token" or HOLD["count"] <= 0:
            return None
        HOLD["count"] -= 1
        HOLD["now"] += 1
        return HOLD["when"]


def wait_for_release(watch_client):
    """Waits for /test/release; False when the caller went away first (only watched when asked)."""
    try:
        while not RELEASE.wait(0.05):
            if watch_client and client_gone():
                return False
        return True
    finally:
        with LOCK:
            HOLD["now"] -= 1


@app.post("/oauth/token")
def token_endpoint():
    grant_type = request.form.get("grant_type")
    with serving.counting_in_flight(LOCK, INFLIGHT, "now", STATS):
        if OPTS.token_delay_ms:
            time.sleep(OPTS.token_delay_ms / 1000.0)
        hold = take_hold(grant_type)
        if hold == "before" and not wait_for_release(watch_client=True):
            count_call(grant_type, "abandoned")
            return "", 499
        with LOCK:
            resp, outcome = injected_failure()
            if resp is None:
                resp = server.create_token_response()
                outcome = outcome_of(resp)
            if resp.status_code == 200 and OPTS.no_expires_in:
                body = json.loads(resp.get_data())
                body.pop("expires_in", None)
                resp.set_data(json.dumps(body))
        count_call(grant_type, outcome)
        if hold == "after":
            wait_for_release(watch_client=False)
        return resp


def unless_down(answer):
    """`answer()` under the lock, or the injected failure while the server is down (/test/down)."""
    with LOCK:
        if STATE["down"]:
            resp, _ = injected_failure()
            if resp is not None:
                return resp
        return answer()


@app.post("/oauth/device")
def device_endpoint():
    def authorize():
        STATS["device_authorizations"] += 1
        return server.create_endpoint_response(DeviceEndpoint.ENDPOINT_NAME)

    return unless_down(authorize)


@app.post("/oauth/revoke")
def revoke_endpoint():
    return unless_down(lambda: server.create_endpoint_response(Revocation.ENDPOINT_NAME))


@app.post("/oauth/introspect")
def introspect_endpoint():
    with LOCK:
        STATS["introspections"] += 1
        return server.create_endpoint_response(Introspection.ENDPOINT_NAME)


@app.get("/device")
def device_page():
    return "Enter your code (tests use POST /test/approve).\n", 200, {"Content-Type": "text/plain"}


# --- test controls -----------------------------------------------------------------------------


def param(name, default=None):
    if name in request.args:
        return request.args[name]
    if request.form and name in request.form:
        return request.form[name]
    body = request.get_json(silent=True)
    if isinstance(body, dict) and name in body:
        return str(body[name])
    return default


@app.get("/test/stats")
def test_stats():
    with LOCK:
        out = json.loads(json.dumps(STATS))
        out["held_now"] = HOLD["now"]
        out["active_refresh_tokens"] = sum(
            1 for t in TOKENS_BY_REFRESH.values() if not (t.rotated or t.refresh_revoked or t.refresh_expired())
        )
    return jsonify(out)


serving.add_test_controls(app, LOCK, reset_stats, STATE)


@app.post("/test/fail")
def test_fail():
    with LOCK:
        STATE["fail_status"] = int(param("status", "503"))
        STATE["fail_count"] = int(param("count", "1"))
        STATE["fail_error"] = param("error")
        STATE["fail_raw"] = param("raw")
        STATE["fail_retry_after"] = param("retry_after")
    return jsonify({"ok": True})


@app.post("/test/hold")
def test_hold():
    with LOCK:
        RELEASE.clear()
        HOLD["count"] = int(param("count", "1"))
        HOLD["when"] = param("when", "before")
    return jsonify({"ok": True})


@app.post("/test/release")
def test_release():
    with LOCK:
        HOLD["count"] = 0
    RELEASE.set()
    return jsonify({"ok": True})


@app.post("/test/revoke-all")
def test_revoke_all():
    with LOCK:
        also_access = param("access") in ("1", "true", "yes")
        for tok in TOKENS_BY_ACCESS.values():
            tok.refresh_revoked = True
            if also_access:
                tok.access_revoked = True
    return jsonify({"ok": True})


@app.post("/test/approve")
def test_approve():
    user_code = param("user_code")
    with LOCK:
        if not user_code or not any(c["user_code"] == user_code for c in DEVICE_CODES.values()):
            return jsonify({"error": "unknown user_code"}), 404
        name = param("username") or next(iter(USERS))
        user = USERS.get(name)
        if user is None:
            return jsonify({"error": "unknown user"}), 404
        USER_GRANTS[user_code] = (user, param("deny") not in ("1", "true", "yes"))
    return jsonify({"ok": True})


# --- start -------------------------------------------------------------------------------------


def main():
    global OPTS
    p = argparse.ArgumentParser(description="Authlib OAuth 2.0 authorization server for tests")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--client", action="append", default=[])
    p.add_argument("--user", action="append", default=[])
    p.add_argument("--access-ttl", type=int, default=20)
    p.add_argument("--refresh-ttl", type=int, default=86400)
    p.add_argument("--jwt", action="store_true")
    p.add_argument("--jwt-key")
    p.add_argument("--jwt-key-file")
    p.add_argument("--no-expires-in", action="store_true")
    p.add_argument("--rotate", dest="rotate", action="store_true", default=True)
    p.add_argument("--no-rotate", dest="rotate", action="store_false")
    p.add_argument("--token-delay-ms", type=int, default=0)
    p.add_argument("--device-interval", type=int, default=1)
    p.add_argument("--device-expires", type=int, default=600)
    p.add_argument("--no-enforce-interval", dest="enforce_interval", action="store_false", default=True)
    p.add_argument("--issuer")
    p.add_argument("--verbose", action="store_true")
    OPTS = p.parse_args()

    for spec in OPTS.client or ["app:secret"]:
        cid, _, secret = spec.partition(":")
        CLIENTS[cid] = Client(cid, secret if ":" in spec else None)
    for spec in OPTS.user or ["alice:wonderland"]:
        name, _, password = spec.partition(":")
        USERS[name] = User(name, password)
    reset_stats()

    httpd = serving.wsgi_server(app, OPTS.port, OPTS.verbose)
    port = httpd.server_port
    if not OPTS.issuer:
        OPTS.issuer = "http://127.0.0.1:%d" % port

    DeviceEndpoint.INTERVAL = OPTS.device_interval
    DeviceEndpoint.EXPIRES_IN = OPTS.device_expires
    refresh_gen = lambda **kw: generate_token(48)  # noqa: E731
    expires = lambda client, grant_type: OPTS.access_ttl  # noqa: E731
    if OPTS.jwt:
        key = OPTS.jwt_key
        if key is None and OPTS.jwt_key_file:
            with open(OPTS.jwt_key_file, "rb") as f:
                key = f.read().strip()
        if not key:
            sys.exit("oauth_server: --jwt needs --jwt-key or --jwt-key-file")
        gen = HS256Generator(key.encode() if isinstance(key, str) else key,
                             refresh_token_generator=refresh_gen, expires_generator=expires)
    else:
        gen = BearerTokenGenerator(lambda **kw: generate_token(42), refresh_gen, expires)
    app.config["OAUTH2_REFRESH_TOKEN_GENERATOR"] = True
    server.init_app(app, query_client=query_client, save_token=save_token)
    server.register_token_generator("default", gen)
    server.register_grant(PasswordGrant)
    server.register_grant(ClientCredentialsGrant)
    RefreshTokenGrant.INCLUDE_NEW_REFRESH_TOKEN = OPTS.rotate
    server.register_grant(RefreshTokenGrant)
    server.register_grant(DeviceGrant)
    server.register_endpoint(DeviceEndpoint)
    server.register_endpoint(Revocation)
    server.register_endpoint(Introspection)

    serving.announce_and_serve(httpd)


if __name__ == "__main__":
    serving.exit_at_once_on_sigterm()
    main()

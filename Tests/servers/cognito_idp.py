#!/usr/bin/env python3
"""Amazon Cognito user pools for tokenproxy's tests: moto's own server application (the one
`moto_server` and ThreadedMotoServer run), in this process, behind a thin WSGI layer that counts
InitiateAuth calls, injects failures and checks SECRET_HASH the way Cognito does.

Run with `--port 0`. Once listening on 127.0.0.1 and set up (through boto3 against itself) it
prints one line on stdout:

  READY {"port":…, "endpoint":"http://127.0.0.1:PORT", "region":"us-east-1", "pool_id":…,
         "client_id":… (no secret), "client_id_secret":…, "client_secret":…,
         "username":"alice@example.com" (the login name), "pool_username":… (the user's own
         username, a GUID: the access token's `username` claim and `sub`), "password":…}

With `--info-file PATH` the JSON is written to PATH (atomically) and the line is `READY <port>`
instead, which is what Tests/TestSupport's PythonServer waits for.

Flags: --access-ttl S (lifetime of access and id tokens, default 3600; moto itself ignores the app
client's AccessTokenValidity, so this patches moto's token factory), --token-delay-ms N,
--username/--password (defaults alice@example.com / Wonderland-1), --lenient-secret-hash (accept
moto's own SECRET_HASH rule for refreshes too), --verbose.

What moto 5.2.1 does (checked with plain HTTP POSTs, `X-Amz-Target:
AWSCognitoIdentityProviderService.InitiateAuth`, `Content-Type: application/x-amz-json-1.1`, no
AWS signature):
  - USER_PASSWORD_AUTH answers {"AuthenticationResult": {"AccessToken", "IdToken", "RefreshToken",
    "ExpiresIn": 3600, "TokenType": "Bearer"}, "ChallengeParameters": {}}. Access and id tokens are
    RS256 JWTs (kid "dummy", moto's fixed key, JWKS at /POOL_ID/.well-known/jwks.json) with `exp`,
    `iat`, `sub`, `token_use`, `client_id` (access) and `username` (access; the GUID when the pool
    uses e-mail as the username, as here); the id token has `cognito:username` and `email`. The
    refresh token is an opaque UUID.
  - REFRESH_TOKEN_AUTH answers the same without "RefreshToken" (no rotation, like Cognito).
  - An unknown or revoked refresh token: HTTP 400 {"__type": "NotAuthorizedException",
    "message": "Refresh Token has been revoked"}. A wrong password: 400 NotAuthorizedException
    "Incorrect username or password." An unknown user: 400 UserNotFoundException.
  - moto does NOT check SECRET_HASH on USER_PASSWORD_AUTH at all, and on REFRESH_TOKEN_AUTH it
    checks it against the name the user logged in with (the e-mail), where Cognito uses the
    user's own username (the GUID in the access token's `username`). This layer enforces
    Cognito's rules: HMAC-SHA256(client secret, USERNAME + client_id) for USER_PASSWORD_AUTH and
    HMAC-SHA256(client secret, pool username + client_id) for REFRESH_TOKEN_AUTH, answering 400
    NotAuthorizedException "Unable to verify secret hash for client <id>" otherwise; a good
    refresh hash is then rewritten to the one moto expects.
  - moto ignores AccessTokenValidity (always 3600 s): see --access-ttl. moto counts nothing:
    this layer does.

Test-only controls (same shapes as oauth_server.py):
  GET  /test/stats        {"calls": {AuthFlow: {outcome: n}}, "token_calls", "max_concurrent",
                          "other_calls": {X-Amz-Target operation: n}}; outcome is "ok", the
                          exception name ("NotAuthorizedException", ...), "injected" or "down"
  POST /test/reset-stats
  POST /test/fail?status=503&count=N[&type=InternalErrorException]   next N InitiateAuth calls fail
  POST /test/down, /test/up   InitiateAuth answers 503 / works again
  POST /test/revoke-all       every refresh token is revoked (the next refresh is
                              NotAuthorizedException)
"""
import argparse
import base64
import hashlib
import hmac
import io
import json
import os
import sys
import threading
import time

from werkzeug.serving import make_server

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from moto.cognitoidp import models as cognito_models

import serving

REGION = "us-east-1"
TARGET_PREFIX = "AWSCognitoIdentityProviderService."
LOCK = threading.Lock()
OPTS = None
STATS = {}
STATE = {"down": False, "fail_count": 0, "fail_status": 503, "fail_type": None, "inflight": 0}
SECRETS = {}  # client_id -> secret


def reset_stats():
    STATS.clear()
    STATS.update({"calls": {}, "token_calls": 0, "max_concurrent": 0, "other_calls": {}})


def secret_hash(secret, username, client_id):
    mac = hmac.new(secret.encode(), (username + client_id).encode(), hashlib.sha256).digest()
    return base64.b64encode(mac).decode()


def pools():
    for account in cognito_models.cognitoidp_backends.values():
        for backend in account.values():
            for pool in backend.user_pools.values():
                yield pool


def json_response(start_response, status, body, reason="Error"):
    data = json.dumps(body).encode()
    start_response("%d %s" % (status, reason), [
        ("Content-Type", "application/x-amz-json-1.1" if "__type" in body else "application/json"),
        ("Content-Length", str(len(data))),
    ])
    return [data]


def aws_error(start_response, status, type_, message):
    return json_response(start_response, status, {"__type": type_, "message": message})


class Front:
    """WSGI layer in front of moto's application."""

    def __init__(self, inner):
        self.inner = inner

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path.startswith("/test/"):
            return self.control(environ, start_response, path)
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if not target.startswith(TARGET_PREFIX):
            return self.inner(environ, start_response)
        operation = target[len(TARGET_PREFIX):]
        if operation != "InitiateAuth":
            with LOCK:
                STATS["other_calls"][operation] = STATS["other_calls"].get(operation, 0) + 1
            return self.inner(environ, start_response)

        length = environ.get("CONTENT_LENGTH")
        body = environ["wsgi.input"].read(int(length)) if length else environ["wsgi.input"].read()
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            request = {}
        flow = str(request.get("AuthFlow") or "(none)")
        with serving.counting_in_flight(LOCK, STATE, "inflight", STATS):
            if OPTS.token_delay_ms:
                time.sleep(OPTS.token_delay_ms / 1000.0)
            status_box = {}

            def recording_start_response(status, headers, exc_info=None):
                status_box["status"] = int(status.split(" ", 1)[0])
                return start_response(status, headers, exc_info)

            result, outcome = self.initiate_auth(environ, request, body, recording_start_response)
            result = list(result)
            if outcome is None:
                if status_box.get("status") == 200:
                    outcome = "ok"
                else:
                    try:
                        outcome = json.loads(b"".join(result)).get("__type") or "http_%d" % status_box.get("status", 0)
                    except ValueError:
                        outcome = "http_%d" % status_box.get("status", 0)
            with LOCK:
                by = STATS["calls"].setdefault(flow, {})
                by[outcome] = by.get(outcome, 0) + 1
                STATS["token_calls"] += 1
            return result

    def initiate_auth(self, environ, request, body, start_response):
        """(iterable, outcome or None for 'look at the answer')."""
        with LOCK:
            if STATE["down"]:
                return aws_error(start_response, 503, "ServiceUnavailable", "down (test)"), "down"
            if STATE["fail_count"] > 0:
                STATE["fail_count"] -= 1
                status = STATE["fail_status"]
                type_ = STATE["fail_type"] or ("InternalErrorException" if status >= 500 else "TooManyRequestsException")
                return aws_error(start_response, status, type_, "injected failure (test)"), "injected"
        flow = request.get("AuthFlow")
        client_id = request.get("ClientId") or ""
        params = request.get("AuthParameters") or {}
        secret = SECRETS.get(client_id)
        if secret is not None and flow in ("USER_PASSWORD_AUTH", "REFRESH_TOKEN_AUTH", "REFRESH_TOKEN"):
            given = params.get("SECRET_HASH") or ""
            def bad():
                return aws_error(start_response, 400, "NotAuthorizedException",
                                 "Unable to verify secret hash for client %s" % client_id)
            if flow == "USER_PASSWORD_AUTH":
                if not hmac.compare_digest(given, secret_hash(secret, params.get("USERNAME") or "", client_id)):
                    return bad(), None
            else:
                entry = None
                for pool in pools():
                    if params.get("REFRESH_TOKEN") in pool.refresh_tokens:
                        entry = (pool, pool.refresh_tokens[params.get("REFRESH_TOKEN")])
                        break
                if entry is not None and entry[1] is not None:
                    pool, (_, login_name, _) = entry
                    user = pool._get_user(login_name)
                    own = user.username if user is not None else login_name
                    accepted = [own] + ([login_name] if OPTS.lenient_secret_hash else [])
                    if not any(hmac.compare_digest(given, secret_hash(secret, name, client_id)) for name in accepted):
                        return bad(), None
                    params["SECRET_HASH"] = secret_hash(secret, login_name, client_id)  # what moto checks
                    body = json.dumps(request).encode()
                # an unknown or revoked refresh token: moto answers NotAuthorizedException
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        return self.inner(environ, start_response), None

    def control(self, environ, start_response, path):
        from urllib.parse import parse_qs
        query = {k: v[-1] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
        method = environ.get("REQUEST_METHOD")
        with LOCK:
            if path == "/test/stats" and method == "GET":
                return json_response(start_response, 200, json.loads(json.dumps(STATS)), "OK")
            if method != "POST":
                return json_response(start_response, 404, {"error": "not found"}, "Not Found")
            if path == "/test/reset-stats":
                reset_stats()
            elif path == "/test/fail":
                STATE["fail_status"] = int(query.get("status", "503"))
                STATE["fail_count"] = int(query.get("count", "1"))
                STATE["fail_type"] = query.get("type")
            elif path == "/test/down":
                STATE["down"] = True
            elif path == "/test/up":
                STATE["down"] = False
            elif path == "/test/revoke-all":
                for pool in pools():
                    for token in list(pool.refresh_tokens):
                        pool.refresh_tokens[token] = None
            else:
                return json_response(start_response, 404, {"error": "not found"}, "Not Found")
        return json_response(start_response, 200, {"ok": True}, "OK")


def patch_token_lifetime(ttl):
    original = cognito_models.CognitoIdpUserPool.create_jwt

    def create_jwt(self, client_id, username, token_use, expires_in=60 * 60, extra_data=None):
        return original(self, client_id, username, token_use, ttl, extra_data)

    cognito_models.CognitoIdpUserPool.create_jwt = create_jwt


def set_up(endpoint):
    import boto3
    client = boto3.client(
        "cognito-idp", region_name=REGION, endpoint_url=endpoint,
        aws_access_key_id="testing", aws_secret_access_key="testing",
    )
    pool_id = client.create_user_pool(
        PoolName="tokenproxy-test", UsernameAttributes=["email"],
        Policies={"PasswordPolicy": {"MinimumLength": 8}},
    )["UserPool"]["Id"]
    flows = ["ALLOW_USER_PASSWORD_AUTH", "ALLOW_REFRESH_TOKEN_AUTH"]
    public = client.create_user_pool_client(
        UserPoolId=pool_id, ClientName="public", ExplicitAuthFlows=flows, GenerateSecret=False,
    )["UserPoolClient"]
    confidential = client.create_user_pool_client(
        UserPoolId=pool_id, ClientName="confidential", ExplicitAuthFlows=flows, GenerateSecret=True,
    )["UserPoolClient"]
    SECRETS[confidential["ClientId"]] = confidential["ClientSecret"]
    user = client.admin_create_user(
        UserPoolId=pool_id, Username=OPTS.username, MessageAction="SUPPRESS",
        UserAttributes=[{"Name": "email", "Value": OPTS.username}, {"Name": "email_verified", "Value": "true"}],
    )["User"]
    client.admin_set_user_password(UserPoolId=pool_id, Username=OPTS.username, Password=OPTS.password, Permanent=True)
    return {
        "region": REGION, "pool_id": pool_id,
        "client_id": public["ClientId"],
        "client_id_secret": confidential["ClientId"], "client_secret": confidential["ClientSecret"],
        "username": OPTS.username, "pool_username": user["Username"], "password": OPTS.password,
    }


def main():
    global OPTS
    import logging
    p = argparse.ArgumentParser(description="moto Cognito user pool for tests")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--access-ttl", type=int, default=3600)
    p.add_argument("--token-delay-ms", type=int, default=0)
    p.add_argument("--username", default="alice@example.com")
    p.add_argument("--password", default="Wonderland-1")
    p.add_argument("--lenient-secret-hash", action="store_true")
    p.add_argument("--info-file")
    p.add_argument("--verbose", action="store_true")
    OPTS = p.parse_args()
    if not OPTS.verbose:
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
    reset_stats()
    patch_token_lifetime(OPTS.access_ttl)

    app = Front(DomainDispatcherApplication(create_backend_app))
    httpd = make_server("127.0.0.1", OPTS.port, app, threaded=True)
    port = httpd.server_port
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    endpoint = "http://127.0.0.1:%d" % port
    for key in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        os.environ.pop(key, None)
    info = {"port": port, "endpoint": endpoint}
    info.update(set_up(endpoint))
    with LOCK:
        reset_stats()  # the set-up calls are not the test's
    if OPTS.info_file:
        tmp = OPTS.info_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump(info, f)
        os.replace(tmp, OPTS.info_file)
        print("READY %d" % port, flush=True)
    else:
        print("READY " + json.dumps(info), flush=True)
    try:
        while thread.is_alive():  # a timed join, so SIGTERM is handled at once
            thread.join(0.5)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    import signal
    signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
    main()

#!/usr/bin/env python3
"""idpyoidc's OAuth 2.0 authorization server (PyPI `idpyoidc`) run as a process, for tokenproxy's
DPoP and RFC 8693 tests. The token endpoint is idpyoidc's own `Token` endpoint with its grant
helpers (authorization_code, refresh_token, token-exchange); DPoP is idpyoidc's add-on
(`idpyoidc.server.oauth2.add_on.dpop.add_support`, `dpop_endpoints: ["token"]`). Access tokens
are idpyoidc's signed JWTs (`JWTToken`): a DPoP-bound one carries `cnf.jkt`. Prints `READY <port>`.

  POST /token              idpyoidc's token endpoint; a refresh answers a new refresh token and
                           revokes the old one. Public clients (token_endpoint_auth_method
                           none): `proxy` (the one tokenproxy is) and `exchanger`. With --dpop every
                           request needs a DPoP proof (idpyoidc checks its signature by the header's
                           jwk, htm and htu).
  GET  /authorization      idpyoidc's authorization endpoint (response_type code, PKCE required by
                           its add-on, S256 only); the user is `diana`, signed in by idpyoidc's
                           NoAuthn method, so it redirects to the client's redirect URI at once
  GET  /jwks               the public keys of the access tokens (JWKS), for a resource server
  POST /test/login         without a browser: the test user (`diana`) signs in and authorizes client `proxy` inside this
                           process: idpyoidc's session manager makes the grant and an authorization
                           code, which is redeemed at idpyoidc's own token endpoint (with a proof made
                           here by a throwaway key under --dpop). Answers the code grant's JSON
                           (access_token, refresh_token, token_type, ...) and the throwaway key's
                           thumbprint as `seed_jkt`.
  GET  /test/stats         {"grants": {grant_type: {status: n}}, "answers": [{"grant_type", "token_type",
                           "expires_in", "jkt" (the proof key's thumbprint idpyoidc bound)}],
                           "exchanges": [{"client_id", "subject_token_type", "actor"}]} of the token
                           endpoint
Flags: --dpop (the add-on on the token endpoint; `dpop_signing_alg_values_supported` is set again
after `Server()` is built, which the refresh grant needs to bind), --access-ttl S, --redirect-uri URI
(registered for `proxy` besides http://127.0.0.1/callback; idpyoidc matches the port exactly).
"""
import argparse
import hashlib
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptojwt.jwk.ec import new_ec_key
from idpyoidc.message.oauth2 import AuthorizationRequest
from idpyoidc.server import Server
from idpyoidc.server.authn_event import create_authn_event
from idpyoidc.server.configure import ASConfiguration
from idpyoidc.server.oauth2.add_on.dpop import DPoPProof
from idpyoidc.server.user_authn.authn_context import INTERNETPROTOCOLPASSWORD
from idpyoidc.time_util import utc_time_sans_frac

LOCK = threading.Lock()  # idpyoidc's session database is not made for threads
STATS = {"grants": {}, "answers": [], "exchanges": []}
USER = "diana"
SCOPE = ["openid", "read"]
STATE = {}


def build(opts, issuer, workdir):
    usage_rules = {
        "authorization_code": {"supports_minting": ["access_token", "refresh_token"], "max_usage": 1},
        "access_token": {"supports_minting": ["access_token"], "expires_in": opts.access_ttl},
        "refresh_token": {"supports_minting": ["access_token", "refresh_token"]},
    }
    conf = {
        "issuer": issuer,
        "httpc_params": {"verify": False},
        "keys": {"uri_path": "jwks", "key_defs": [{"type": "EC", "crv": "P-256", "use": ["sig"]}],
                 "private_path": os.path.join(workdir, "keys.json"), "read_only": False},
        "token_handler_args": {
            "jwks_def": {"private_path": os.path.join(workdir, "token_jwks.json"),
                         "key_defs": [{"type": "oct", "bytes": 24, "use": ["enc"], "kid": "code"}],
                         "read_only": False},
            "code": {"kwargs": {"lifetime": 600}},
            "token": {"class": "idpyoidc.server.token.jwt_token.JWTToken",
                      "kwargs": {"lifetime": opts.access_ttl, "aud": ["https://api.example"]}},
            "refresh": {"kwargs": {"lifetime": 86400}},
        },
        "endpoint": {
            "authorization": {
                "path": "authorization",
                "class": "idpyoidc.server.oauth2.authorization.Authorization",
                "kwargs": {"response_types_supported": ["code"], "response_modes_supported": ["query"]},
            },
            "token": {
                "path": "token",
                "class": "idpyoidc.server.oauth2.token.Token",
                "kwargs": {"client_authn_method": ["none"], "revoke_refresh_on_issue": True,
                           "grant_types_supported": {
                               "authorization_code": {"class": "idpyoidc.server.oauth2.token_helper.access_token.AccessTokenHelper"},
                               "refresh_token": {"class": "idpyoidc.server.oauth2.token_helper.refresh_token.RefreshTokenHelper"},
                               "urn:ietf:params:oauth:grant-type:token-exchange": {
                                   "class": "idpyoidc.server.oauth2.token_helper.token_exchange.TokenExchangeHelper"},
                           }},
            },
        },
        "authentication": {"anon": {"acr": INTERNETPROTOCOLPASSWORD,
                                    "class": "idpyoidc.server.user_authn.user.NoAuthn", "kwargs": {"user": USER}}},
        "authz": {"class": "idpyoidc.server.authz.AuthzHandling",
                  "kwargs": {"grant_config": {"usage_rules": usage_rules, "expires_in": 43200}}},
        "userinfo": {"class": "idpyoidc.server.user_info.UserInfo",
                     "kwargs": {"db": {USER: {"sub": USER, "name": "Diana Prince", "email": "diana@example.org"}}}},
        "scopes_to_claims": {"openid": ["sub"], "read": [], "offline_access": []},
        "session_params": {"encrypter": {"kwargs": {"keys": {"key_defs": [
            {"type": "OCT", "use": ["enc"], "kid": "password"},
            {"type": "OCT", "use": ["enc"], "kid": "salt"}]}, "iterations": 1}}},
    }
    conf["add_ons"] = {"pkce": {"function": "idpyoidc.server.oauth2.add_on.pkce.add_support",
                                "kwargs": {"essential": True, "code_challenge_methods": {"S256": hashlib.sha256}}}}
    if opts.dpop:
        conf["add_ons"]["dpop"] = {"function": "idpyoidc.server.oauth2.add_on.dpop.add_support",
                                   "kwargs": {"dpop_signing_alg_values_supported": ["ES256"],
                                              "dpop_endpoints": ["token"]}}
    server = Server(ASConfiguration(conf, base_path=workdir), cwd=workdir)
    context = server.context
    if opts.dpop:
        # The refresh grant binds only when this is in provider_info, which Server() leaves out.
        context.provider_info["dpop_signing_alg_values_supported"] = ["ES256"]
    for client_id in ("proxy", "exchanger"):
        context.cdb[client_id] = {
            "client_id": client_id,
            "client_secret": None,
            "token_endpoint_auth_method": "none",
            "redirect_uris": [("http://127.0.0.1/callback", {})] + [(uri, {}) for uri in opts.redirect_uri],
            "response_types_supported": ["code"],
            "grant_types": ["authorization_code", "refresh_token",
                            "urn:ietf:params:oauth:grant-type:token-exchange"],
            "allowed_scopes": SCOPE + ["offline_access"],
        }
    return server


def count(grant, status):
    table = STATS["grants"].setdefault(grant or "-", {})
    table[str(status)] = table.get(str(status), 0) + 1


def call_token_endpoint(form, headers, url):
    """idpyoidc's token endpoint: parse_request (client authn, the DPoP add-on, the grant
    helper's checks), process_request, do_response. Returns (status, JSON text)."""
    endpoint = STATE["server"].get_endpoint("token")
    http_info = {"headers": headers, "url": url, "method": "POST"}
    with LOCK:
        if form.get("grant_type") == "urn:ietf:params:oauth:grant-type:token-exchange":
            STATS["exchanges"].append({"client_id": form.get("client_id"),
                                       "subject_token_type": form.get("subject_token_type"),
                                       "actor": "actor_token" in form})
        try:
            request = endpoint.parse_request(form, http_info=http_info)
        except Exception as error:  # the DPoP add-on raises on a bad proof
            count(form.get("grant_type"), 400)
            return 400, json.dumps({"error": "invalid_dpop_proof", "error_description": str(error)})
        if "error" in request:
            count(form.get("grant_type"), 400)
            return 400, request.to_json()
        try:
            answer = endpoint.process_request(request, http_info=http_info, issue_refresh=True)
        except Exception as error:
            count(form.get("grant_type"), 500)
            return 500, json.dumps({"error": "server_error", "error_description": repr(error)})
        if "error" in answer:
            count(form.get("grant_type"), 400)
            return 400, json.dumps(answer.to_dict() if hasattr(answer, "to_dict") else dict(answer))
        args = answer.get("response_args", answer)
        args = args.to_dict() if hasattr(args, "to_dict") else dict(args)
        count(form.get("grant_type"), 200)
        STATS["answers"].append({"grant_type": form.get("grant_type"), "token_type": args.get("token_type"),
                                 "expires_in": args.get("expires_in"), "jkt": request.get("dpop_jkt")})
        return 200, json.dumps(args)


def login():
    """The test user authorizes `proxy`: a grant and a code from idpyoidc's session manager, then
    the code is redeemed at the token endpoint as a client would."""
    server = STATE["server"]
    context = server.context
    redirect = "http://127.0.0.1/callback"
    with LOCK:
        auth_req = AuthorizationRequest(client_id="proxy", redirect_uri=redirect, response_type="code",
                                        scope=SCOPE + ["offline_access"], state="s")
        authn_event = create_authn_event(USER, authn_info=INTERNETPROTOCOLPASSWORD, authn_time=utc_time_sans_frac())
        session_id = context.session_manager.create_session(
            authn_event=authn_event, auth_req=auth_req, user_id=USER, client_id="proxy",
            token_usage_rules=context.authz.usage_rules("proxy"))
        grant = context.session_manager[session_id]
        code = grant.mint_token(session_id, context=context, token_class="authorization_code",
                                token_handler=context.session_manager.token_handler["authorization_code"])
    form = {"grant_type": "authorization_code", "code": code.value, "redirect_uri": redirect,
            "client_id": "proxy"}
    url = STATE["issuer"] + "/token"
    headers = {}
    seed_jkt = None
    if STATE["opts"].dpop:
        key = new_ec_key("P-256")
        proof = DPoPProof(typ="dpop+jwt", alg="ES256", jwk=key.serialize(), jti=os.urandom(12).hex(),
                          htm="POST", htu=url, iat=utc_time_sans_frac())
        proof.key = key
        headers["dpop"] = proof.create_header()
        seed_jkt = key.thumbprint("SHA-256").decode()
    status, text = call_token_endpoint(form, headers, url)
    answer = json.loads(text)
    answer["seed_jkt"] = seed_jkt
    return status, json.dumps(answer)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, text, content_type="application/json"):
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Cache-Control", "no-store")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        path = urllib.parse.urlsplit(self.path).path
        if path == "/jwks":
            keyjar = STATE["server"].keyjar
            return self.answer(200, json.dumps(keyjar.export_jwks(issuer_id="")))
        if path == "/authorization":
            return self.authorize()
        if path == "/test/stats":
            with LOCK:
                return self.answer(200, json.dumps(STATS))
        self.answer(404, "{}")

    def authorize(self):
        """idpyoidc's authorization endpoint; the user is signed in by its NoAuthn method."""
        endpoint = STATE["server"].get_endpoint("authorization")
        query = {k: v[0] for k, v in urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query).items()}
        http_info = {"headers": {k.lower(): v for k, v in self.headers.items()},
                     "url": STATE["issuer"] + self.path, "method": "GET"}
        with LOCK:
            request = endpoint.parse_request(query, http_info=http_info)
            if "error" in request:
                count("authorization", 400)
                return self.answer(400, request.to_json())
            args = endpoint.process_request(request, http_info=http_info)
            if "error" in args:
                count("authorization", 400)
                return self.answer(400, json.dumps(args.to_dict() if hasattr(args, "to_dict") else dict(args)))
            reply = endpoint.do_response(request=request, **args)
            count("authorization", 302)
        self.send_response(302)
        self.send_header("Location", reply["response"])
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        path = urllib.parse.urlsplit(self.path).path
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode()
        if path == "/token":
            form = {k: v[0] for k, v in urllib.parse.parse_qs(body).items()}
            headers = {k.lower(): v for k, v in self.headers.items()}
            return self.answer(*call_token_endpoint(form, headers, STATE["issuer"] + "/token"))
        if path == "/test/login":
            return self.answer(*login())
        self.answer(404, "{}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--dpop", action="store_true")
    p.add_argument("--access-ttl", type=int, default=3600)
    p.add_argument("--redirect-uri", action="append", default=[])
    opts = p.parse_args()
    httpd = ThreadingHTTPServer(("127.0.0.1", opts.port), Handler)
    issuer = "http://127.0.0.1:%d" % httpd.server_port
    workdir = tempfile.mkdtemp(prefix="idpy-server-")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        STATE.update(opts=opts, issuer=issuer, server=build(opts, issuer, workdir))
        print("READY %d" % httpd.server_port, flush=True)
        httpd.serve_forever()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()

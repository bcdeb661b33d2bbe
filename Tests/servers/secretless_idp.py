#!/usr/bin/env python3
"""An OAuth 2.0 authorization server for tokenproxy's secretless credentials, built on Authlib's
AuthorizationServer (Flask) and its RFC 7523 classes: `JWTBearerClientAssertion` authenticates
clients by private_key_jwt, client_secret_jwt and federated client assertions, `JWTBearerGrant`
is the jwt-bearer grant. RFC 8693 token exchange is a grant class written here (Authlib's rfc8693
module is empty). In-memory, one process; prints `READY <port>` once listening on 127.0.0.1.

Flags:
  --client ID:KIND[:ARG]   repeatable. KIND is
        private_key_jwt:PEM   the public half of the private key in PEM file ARG is the client's
                              registered JWKS (RSA or EC; RS256, PS256, ES256 accepted)
        client_secret_jwt:SECRET
        federated:SUBJECT     the client authenticates with a client assertion issued by this
                              server's "cluster" issuer (POST /test/mint) whose sub is SUBJECT and
                              aud api://AzureADTokenExchange (Azure workload identity's scheme)
        secret:SECRET         client_secret_basic / client_secret_post
        public                no authentication (client_id in the form)
  --access-ttl S          access token lifetime (default 60)

Endpoints:
  POST /oauth/token     grants client_credentials, password (any user name, password "pw"),
                        refresh_token, urn:ietf:params:oauth:grant-type:jwt-bearer (assertion
                        signed by a private_key_jwt client's key, iss = the client id),
                        urn:ietf:params:oauth:grant-type:token-exchange (subject_token: a JWT
                        minted by /test/mint; actor_token optional, same issuer)
  POST /oauth/revoke    RFC 7009
  GET  /api/...         a protected resource: 200 {"client", "sub", "grant"} for a valid token
  POST /test/mint?sub=S&aud=A&ttl=T   a JWT of the cluster issuer (ES256), as a projected token;
                        the cluster issuer is also a registered jwt-bearer issuer
  POST /test/revoke-all every access token issued so far is revoked (the API answers 401)
  GET  /test/stats      {"calls": {grant: {outcome: n}}, "auth": {method: n}, "algs": {alg: n},
                        "jti_reused": n, "assertion_subjects": {sub: n}, "exchanges": [...],
                        "api_ok": n, "api_unauthorized": n, "form_client_ids": n}
"""
import argparse
import json
import sys
import threading
import time
import uuid

from flask import Flask, jsonify, request
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, KeySet, OctKey, import_key

from authlib.common.security import generate_token
from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import grants
from authlib.oauth2.rfc6749.errors import InvalidClientError, InvalidGrantError, InvalidRequestError
from authlib.oauth2.rfc6749.grants import BaseGrant, TokenEndpointMixin
from authlib.oauth2.rfc6750 import BearerTokenGenerator
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7523 import JWTBearerClientAssertion, JWTBearerGrant

import serving
from authlib_models import IssuedToken, RegisteredClient

LOCK = threading.RLock()
OPTS = None
CLUSTER_KEY = ECKey.generate_key("P-256", private=True)
CLUSTER_ISSUER = "https://cluster.test"
FEDERATED_AUDIENCE = "api://AzureADTokenExchange"
ALGORITHMS = ["RS256", "PS256", "ES256", "HS256"]
JWT_METHOD = JWTBearerClientAssertion.CLIENT_AUTH_METHOD  # one name for every assertion kind
CLIENTS = {}
TOKENS = {}
REFRESH = {}
SEEN_JTI = set()
STATS = {}


def reset_stats():
    STATS.clear()
    STATS.update({"calls": {}, "auth": {}, "algs": {}, "jti_reused": 0, "assertion_subjects": {},
                  "exchanges": [], "api_ok": 0, "api_unauthorized": 0, "form_client_ids": 0})


def bump(table, key):
    STATS[table][key] = STATS[table].get(key, 0) + 1


class User:
    def __init__(self, name):
        self.name = name

    def get_user_id(self):
        return self.name


class Client(RegisteredClient):
    def __init__(self, client_id, kind, arg):
        super().__init__(client_id)
        self.kind = kind
        self.secret = arg if kind in ("secret", "client_secret_jwt") else None
        self.subject = arg if kind == "federated" else None
        self.jwks = None
        if kind == "cluster":
            self.jwks = KeySet.import_key_set({"keys": [CLUSTER_KEY.as_dict(private=False)]})
        if kind == "private_key_jwt":
            with open(arg) as f:
                private = import_key(f.read())
            public = private.as_dict(private=False)
            public["kid"] = "key-1"
            self.jwks = KeySet.import_key_set({"keys": [public]})

    def check_client_secret(self, client_secret):
        return self.secret is not None and self.kind == "secret" and client_secret == self.secret

    def check_endpoint_auth_method(self, method, endpoint):
        if self.kind == "secret":
            return method in ("client_secret_basic", "client_secret_post")
        if self.kind == "public":
            return method == "none"
        return method == JWT_METHOD



class Token(IssuedToken):
    def __init__(self, data, client_id, user, grant):
        super().__init__(data, client_id, user, OPTS.access_ttl, CLIENTS)
        self.grant = grant
        self.revoked = False

    def get_scope(self):
        return ""

    def is_revoked(self):
        return self.revoked


def query_client(client_id):
    return CLIENTS.get(client_id)


def save_token(token, req):
    with LOCK:
        tok = Token(token, req.client.get_client_id(), req.user, req.form.get("grant_type"))
        TOKENS[tok.access_token] = tok
        if tok.refresh_token:
            REFRESH[tok.refresh_token] = tok


def audiences():
    return [OPTS.issuer + "/oauth/token", OPTS.issuer]


class Assertion(JWTBearerClientAssertion):
    """RFC 7523 §2.2 client authentication. Clients registered with a key or a secret sign their
    own assertion (iss = sub = client_id, checked by Authlib); a federated client presents a JWT of
    the cluster issuer whose sub is its registered subject (sub != client_id, so the client is found
    by the form's client_id)."""

    def __call__(self, query_client, req):
        if req.form.get("client_id"):
            with LOCK:
                STATS["form_client_ids"] += 1
        assertion = req.form.get("client_assertion")
        client = CLIENTS.get(req.form.get("client_id") or "")
        if assertion and client is not None and client.kind == "federated":
            try:
                token = jwt.decode(assertion, CLUSTER_KEY)
                jwt.JWTClaimsRegistry(
                    leeway=0, iss={"essential": True, "value": CLUSTER_ISSUER}, sub={"essential": True, "value": client.subject},
                    aud={"essential": True, "value": FEDERATED_AUDIENCE}, exp={"essential": True}).validate(token.claims)
            except Exception as e:
                raise InvalidClientError(description="federated assertion refused: %s" % type(e).__name__)
            with LOCK:
                bump("auth", "federated")
                bump("assertion_subjects", token.claims["jti"])
            req.client = client
            return client
        result = super().__call__(query_client, req)
        if result is not None:
            header = json.loads(_b64(assertion.split(".")[0]))
            with LOCK:
                bump("auth", result.kind)
                bump("algs", header.get("alg"))
        return result

    def get_audiences(self):
        return audiences()

    def process_assertion_claims(self, assertion, key):
        # joserfc accepts only its "recommended" algorithms unless told; PS256 is not among them.
        try:
            token = jwt.decode(assertion, key, algorithms=ALGORITHMS)
        except JoseError as e:
            raise InvalidClientError(description=e.description)
        self.verify_claims(token.claims)
        return token.claims

    def resolve_client_public_key(self, client):
        if client.kind == "client_secret_jwt":
            return OctKey.import_key(client.secret)
        if client.jwks is None:
            raise InvalidClientError(description="this client has no registered key")
        return client.jwks

    def validate_jti(self, claims, jti):
        with LOCK:
            if jti in SEEN_JTI:
                STATS["jti_reused"] += 1
                return False
            SEEN_JTI.add(jti)
            return True


def _b64(text):
    import base64
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


METHODS = [JWT_METHOD, "client_secret_basic", "client_secret_post"]


class ClientCredentials(grants.ClientCredentialsGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = METHODS


class Password(grants.ResourceOwnerPasswordCredentialsGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = METHODS

    def authenticate_user(self, username, password):
        return User(username) if password == "pw" else None


class Refresh(grants.RefreshTokenGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = METHODS
    INCLUDE_NEW_REFRESH_TOKEN = True

    def authenticate_refresh_token(self, refresh_token):
        tok = REFRESH.get(refresh_token)
        return None if tok is None or tok.revoked else tok

    def authenticate_user(self, refresh_token):
        return refresh_token.user

    def revoke_old_credential(self, refresh_token):
        refresh_token.revoked = True


class JWTBearer(JWTBearerGrant):
    """RFC 7523 §2.1: the assertion is signed by a registered client's key (iss = its id)."""

    def resolve_issuer_client(self, issuer):
        return CLIENTS.get(issuer)

    def resolve_client_public_key(self, client):
        if client.jwks is None:
            raise InvalidGrantError(description="the issuer has no registered key")
        return client.jwks

    def authenticate_user(self, subject):
        return User(subject)

    def has_granted_permission(self, client, user):
        return True

    def get_audiences(self):
        return audiences()

    def validate_token_request(self):
        super().validate_token_request()
        claims = jwt.decode(self.request.form["assertion"], self.request.client.jwks).claims
        with LOCK:
            if claims.get("jti") in SEEN_JTI:
                STATS["jti_reused"] += 1
                raise InvalidGrantError(description="the assertion was used before")
            SEEN_JTI.add(claims.get("jti"))
            bump("assertion_subjects", claims.get("sub"))


TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
JWT_TYPE = "urn:ietf:params:oauth:token-type:jwt"
ACCESS_TYPE = "urn:ietf:params:oauth:token-type:access_token"


class TokenExchange(BaseGrant, TokenEndpointMixin):
    """RFC 8693 §2.1-2.2: a subject token (and optionally an actor token), both JWTs of the cluster
    issuer, traded for an access token. The client authenticates as the grant's methods allow, or
    is named by client_id only (public)."""
    GRANT_TYPE = TOKEN_EXCHANGE
    TOKEN_ENDPOINT_AUTH_METHODS = METHODS + ["none"]

    def _read(self, name, required):
        token = self.request.form.get(name)
        kind = self.request.form.get(name + "_type")
        if not token:
            if required:
                raise InvalidRequestError(description="missing %s" % name)
            return None
        if kind != JWT_TYPE:
            raise InvalidRequestError(description="unsupported %s_type" % name)
        try:
            claims = jwt.decode(token, CLUSTER_KEY).claims
            jwt.JWTClaimsRegistry(leeway=0, exp={"essential": True}).validate(claims)
        except Exception:
            raise InvalidGrantError(description="%s is not valid" % name)
        return claims

    def validate_token_request(self):
        client = self.authenticate_token_endpoint_client()
        self.request.client = client
        self.subject = self._read("subject_token", True)
        self.actor = self._read("actor_token", False)
        requested = self.request.form.get("requested_token_type")
        if requested not in (None, ACCESS_TYPE):
            raise InvalidRequestError(description="unsupported requested_token_type")
        self.request.user = User(self.subject["sub"])

    def create_token_response(self):
        token = self.generate_token(user=self.request.user, scope=self.request.form.get("scope"), include_refresh_token=False)
        self.save_token(token)
        form = self.request.form
        with LOCK:
            STATS["exchanges"].append({
                "subject": self.subject["sub"], "subject_jti": self.subject.get("jti"),
                "actor": self.actor["sub"] if self.actor else None,
                "resource": form.get("resource"), "audience": form.get("audience"), "scope": form.get("scope"),
                "requested_token_type": form.get("requested_token_type"),
            })
        token["issued_token_type"] = ACCESS_TYPE
        return 200, token, self.TOKEN_RESPONSE_HEADER


class Revocation(RevocationEndpoint):
    CLIENT_AUTH_METHODS = METHODS

    def query_token(self, token_string, token_type_hint):
        return REFRESH.get(token_string) or TOKENS.get(token_string)

    def revoke_token(self, token, req):
        with LOCK:
            bump("calls", "revocation")
            token.revoked = True


app = Flask(__name__)
server = AuthorizationServer()


@app.route("/oauth/token", methods=["POST"])
def issue_token():
    grant = request.form.get("grant_type") or "(none)"
    response = server.create_token_response()
    outcome = "ok"
    if response.status_code != 200:
        try:
            outcome = json.loads(response.get_data())["error"]
        except Exception:
            outcome = "HTTP %d" % response.status_code
    with LOCK:
        by = STATS["calls"].setdefault(grant, {})
        by[outcome] = by.get(outcome, 0) + 1
    return response


@app.route("/oauth/revoke", methods=["POST"])
def revoke():
    return server.create_endpoint_response(Revocation.ENDPOINT_NAME)


@app.route("/api/<path:rest>", methods=["GET", "POST"])
def api(rest):
    header = request.headers.get("Authorization", "")
    tok = TOKENS.get(header[7:]) if header.startswith("Bearer ") else None
    with LOCK:
        if tok is None or tok.revoked or tok.is_expired():
            STATS["api_unauthorized"] += 1
            return jsonify(error="invalid_token"), 401, {"WWW-Authenticate": 'Bearer error="invalid_token"'}
        STATS["api_ok"] += 1
    return jsonify(client=tok.client_id, sub=tok.user.name if tok.user else None, grant=tok.grant, path="/" + rest)


@app.route("/test/mint", methods=["POST"])
def mint():
    now = int(time.time())
    claims = {"iss": CLUSTER_ISSUER, "sub": request.args.get("sub", "system:serviceaccount:default:app"),
              "aud": request.args.get("aud", FEDERATED_AUDIENCE), "iat": now,
              "exp": now + int(request.args.get("ttl", "600")), "jti": str(uuid.uuid4())}
    return jwt.encode({"alg": "ES256"}, claims, CLUSTER_KEY), 200, {"Content-Type": "text/plain"}


@app.route("/test/revoke-all", methods=["POST"])
def revoke_all():
    with LOCK:
        for tok in TOKENS.values():
            tok.revoked = True
    return jsonify(ok=True)


serving.add_test_controls(app, LOCK, stats=STATS)


def main():
    global OPTS
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--client", action="append", default=[])
    p.add_argument("--access-ttl", type=int, default=60)
    OPTS = p.parse_args()
    for spec in OPTS.client:
        cid, kind, arg = (spec.split(":", 2) + [None])[:3]
        CLIENTS[cid] = Client(cid, kind, arg)
    CLIENTS[CLUSTER_ISSUER] = Client(CLUSTER_ISSUER, "cluster", None)
    reset_stats()
    httpd = serving.wsgi_server(app, OPTS.port)
    OPTS.issuer = "http://127.0.0.1:%d" % httpd.server_port
    server.init_app(app, query_client=query_client, save_token=save_token)
    server.register_token_generator("default", BearerTokenGenerator(lambda **kw: generate_token(42), lambda **kw: generate_token(48),
                                                                    lambda client, grant_type: OPTS.access_ttl))
    server.register_client_auth_method(JWT_METHOD, Assertion())
    for grant in (ClientCredentials, Password, Refresh, JWTBearer, TokenExchange):
        server.register_grant(grant)
    server.register_endpoint(Revocation)
    serving.announce_and_serve(httpd)


if __name__ == "__main__":
    main()

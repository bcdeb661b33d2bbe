#!/usr/bin/env python3
"""Amazon Cognito identity pools (the cognito-identity service) for tokenproxy's tests: GetId and
GetCredentialsForIdentity with the checks AWS makes, which moto 5.2.1's cognito-identity does not
(with IAM auth on it answers GetCredentialsForIdentity with 500; without, fixed keys, and it never
looks at Logins).

    cognito_identity.py --port 0 --jwks-url URL --issuer ISS --audience CLIENT_ID \
        --provider cognito-idp.REGION.amazonaws.com/POOL --identity-pool-id REGION:UUID --sequence FILE

AWS JSON 1.1 at `/`, unsigned, chosen by `X-Amz-Target: AWSCognitoIdentityService.<operation>`:
- GetId {"IdentityPoolId", "Logins"} -> {"IdentityId"}: one identity per user (`sub`).
- GetCredentialsForIdentity {"IdentityId", "Logins"} -> {"IdentityId", "Credentials": {"AccessKeyId",
  "SecretKey", "SessionToken", "Expiration" (seconds since the epoch)}}.
Each Logins must hold exactly the configured provider, and its ID token must verify: an RS256
signature by a key of the user pool's JWKS (fetched from --jwks-url, moto's for the tests), `iss`,
`aud` = the app client, `token_use` = "id", `exp` in the future, and for GetCredentialsForIdentity
the identity's own `sub`. Otherwise 400 NotAuthorizedException, as Cognito answers. An unknown pool
is 400 ResourceNotFoundException; so is an unknown identity id.

The credentials issued are the entries of --sequence (a JSON list of {"AccessKeyId", "SecretKey",
"SessionToken", "lifetime" (seconds), "delay" (seconds to wait before answering, optional)}) in
order, the last one again once the list is used up; the tests give the same keys to
sigv4_verifier.py, which then checks the signatures made with them.

Test-only controls:
  GET  /test/stats    {"get_id", "get_credentials", "refused", "max_concurrent": numbers,
                       "logins_tokens": [the ID token of each GetCredentialsForIdentity that
                       succeeded], "identity_ids": [each IdentityId answered]}
  POST /test/refuse   every ID token is refused from now on (NotAuthorizedException)
  POST /test/forget   every identity is forgotten (GetCredentialsForIdentity: ResourceNotFoundException)
  POST /test/fail?count=N   the next N GetCredentialsForIdentity calls answer 500 InternalErrorException

Prints `READY <port>` once listening; stops on SIGTERM or when its parent ends.
"""

import argparse
import json
import sys
import threading
import time
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet
import serving

ARGS = None
LOCK = threading.Lock()
STATE = {
    "identities": {},  # identity id -> sub
    "by_sub": {},  # sub -> identity id
    "issued": 0,
    "refuse": False,
    "fail": 0,
    "in_flight": 0,
}
STATS = {"get_id": 0, "get_credentials": 0, "refused": 0, "max_concurrent": 0, "logins_tokens": [], "identity_ids": []}
KEYS = {}


def key_set():
    with LOCK:
        if "set" not in KEYS:
            with urllib.request.urlopen(ARGS.jwks_url, timeout=10) as answer:
                KEYS["set"] = KeySet.import_key_set(json.loads(answer.read()))
        return KEYS["set"]


def verified_claims(logins):
    """The ID token's claims when Logins is exactly the provider with a token that verifies, else None."""
    if not isinstance(logins, dict) or list(logins) != [ARGS.provider] or not isinstance(logins[ARGS.provider], str):
        return None
    token = logins[ARGS.provider]
    try:
        decoded = jwt.decode(token, key_set(), algorithms=["RS256"])
    except (JoseError, ValueError):
        return None
    claims = decoded.claims
    if decoded.header.get("alg") != "RS256":
        return None
    if claims.get("iss") != ARGS.issuer or claims.get("aud") != ARGS.audience or claims.get("token_use") != "id":
        return None
    if not isinstance(claims.get("exp"), (int, float)) or claims["exp"] <= time.time():
        return None
    return claims


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body):
        serving.send_json(self, status, body, "application/x-amz-json-1.1")

    def error(self, type_, message):
        if type_ == "NotAuthorizedException":
            with LOCK:
                STATS["refused"] += 1
        self.answer(400, {"__type": type_, "message": message})

    def do_GET(self):
        if self.path == "/test/stats":
            with LOCK:
                self.answer(200, STATS)
        else:
            self.answer(404, {})

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length) if length else b""
        if self.path == "/test/refuse":
            with LOCK:
                STATE["refuse"] = True
            self.answer(200, {})
            return
        if self.path.startswith("/test/fail?count="):
            with LOCK:
                STATE["fail"] = int(self.path.split("=", 1)[1])
            self.answer(200, {})
            return
        if self.path == "/test/forget":
            with LOCK:
                STATE["identities"].clear()
                STATE["by_sub"].clear()
            self.answer(200, {})
            return
        target = self.headers.get("X-Amz-Target", "")
        if self.path != "/" or self.headers.get("Content-Type") != "application/x-amz-json-1.1":
            self.error("SerializationException", "expected AWS JSON 1.1 at /")
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self.error("SerializationException", "the body is not JSON")
            return
        with LOCK:
            STATE["in_flight"] += 1
            STATS["max_concurrent"] = max(STATS["max_concurrent"], STATE["in_flight"])
        try:
            if target == "AWSCognitoIdentityService.GetId":
                self.get_id(body)
            elif target == "AWSCognitoIdentityService.GetCredentialsForIdentity":
                self.get_credentials(body)
            else:
                self.error("UnknownOperationException", "unknown operation")
        finally:
            with LOCK:
                STATE["in_flight"] -= 1

    def claims(self, body):
        claims = verified_claims(body.get("Logins"))
        with LOCK:
            refuse = STATE["refuse"]
        if claims is None or refuse:
            self.error("NotAuthorizedException", "Invalid login token.")
            return None
        return claims

    def get_id(self, body):
        with LOCK:
            STATS["get_id"] += 1
        if body.get("IdentityPoolId") != ARGS.identity_pool_id:
            self.error("ResourceNotFoundException", "IdentityPool not found")
            return
        claims = self.claims(body)
        if claims is None:
            return
        with LOCK:
            identity = STATE["by_sub"].get(claims["sub"])
            if identity is None:
                identity = f"{ARGS.identity_pool_id.split(':')[0]}:{uuid.uuid4()}"
                STATE["by_sub"][claims["sub"]] = identity
                STATE["identities"][identity] = claims["sub"]
            STATS["identity_ids"].append(identity)
        self.answer(200, {"IdentityId": identity})

    def get_credentials(self, body):
        with LOCK:
            STATS["get_credentials"] += 1
            sub = STATE["identities"].get(body.get("IdentityId"))
            failing = STATE["fail"] > 0
            STATE["fail"] -= 1 if failing else 0
        if failing:
            self.answer(500, {"__type": "InternalErrorException", "message": "injected"})
            return
        if sub is None:
            self.error("ResourceNotFoundException", "Identity not found")
            return
        claims = self.claims(body)
        if claims is None:
            return
        if claims["sub"] != sub:
            self.error("NotAuthorizedException", "Logins don't match the identity")
            return
        with LOCK:
            entry = ARGS.sequence[min(STATE["issued"], len(ARGS.sequence) - 1)]
            STATE["issued"] += 1
        time.sleep(entry.get("delay", 0))
        with LOCK:
            STATS["logins_tokens"].append(body["Logins"][ARGS.provider])
        self.answer(
            200,
            {
                "IdentityId": body["IdentityId"],
                "Credentials": {
                    "AccessKeyId": entry["AccessKeyId"],
                    "SecretKey": entry["SecretKey"],
                    "SessionToken": entry["SessionToken"],
                    "Expiration": int(time.time() + entry["lifetime"]),
                },
            },
        )


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--jwks-url", required=True)
    parser.add_argument("--issuer", required=True)
    parser.add_argument("--audience", required=True)
    parser.add_argument("--provider", required=True)
    parser.add_argument("--identity-pool-id", required=True)
    parser.add_argument("--sequence", required=True)
    ARGS = parser.parse_args()
    with open(ARGS.sequence) as handle:
        ARGS.sequence = json.load(handle)
    server = ThreadingHTTPServer(("127.0.0.1", ARGS.port), Handler)
    server.daemon_threads = True
    serving.serve_until_stopped(server)
    sys.exit(0)


if __name__ == "__main__":
    main()

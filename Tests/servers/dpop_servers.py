#!/usr/bin/env python3
"""An authorization server that issues DPoP-bound tokens and a protected API that verifies DPoP
proofs fully (RFC 9449), with joserfc, for tokenproxy's DPoP tests. One process, Flask; prints
`READY <port>`.

  POST /oauth/token   client_credentials (any client_id; no secret). Every request must carry a
                      valid proof (§4.3: typ dpop+jwt, ES256, the header's jwk verifies the
                      signature, htm POST, htu this URL, iat within 60 s, jti never seen). With
                      --as-nonce the proof must carry the server's nonce: without it, 400
                      {"error":"use_dpop_nonce"} and a DPoP-Nonce field (§8). Answers token_type
                      DPoP (or Bearer with --bearer); the token is bound to the proof key's RFC 7638
                      thumbprint (cnf.jkt, §6).
  GET|POST /api/...   `Authorization: DPoP <token>` and a proof whose signature verifies by its
                      jwk, htm = the method, htu = this URL without query, iat within 60 s, a jti
                      never seen, ath = base64url(SHA-256(token)), and jkt = the token's cnf.jkt.
                      With --api-nonce the proof must carry the API's nonce (one per Host: each origin a server of its own): else 401 with
                      `WWW-Authenticate: DPoP error="use_dpop_nonce"` and DPoP-Nonce (§9). 200
                      {"jkt", "htu"}; a failure is 401 with the reason counted.
  POST /oauth/device  RFC 8628 device authorization; the device_code grant is approved at the
                      second poll whose proof passes (the first answers authorization_pending).
  GET /test/stats     {"token_calls", "token_nonce_demands", "token_foreign_nonces" (token requests whose
                      proof carried a nonce the token endpoint never gave), "api_ok", "api_nonce_demands",
                      "api_refused": {reason: n}, "jkts": [...], "jti_reused", "expected_jkt_seen",
                      "elsewhere_client_ids": the client_id claim of each --jwks-url token verified}
Flags: --access-ttl S, --as-nonce, --api-nonce, --bearer, --expect-key PEM (its thumbprint is
compared with every bound key: expected_jkt_seen), --refuse-dpop (every token request: 400
invalid_dpop_proof), --jwks-url URL (the API also accepts JWT access tokens another authorization
server issued, such as idpyoidc's: signature by a key of that JWKS, exp, and cnf.jkt as the bound
key; a token without cnf is accepted only as Bearer).
"""
import argparse
import base64
import hashlib
import json
import secrets
import threading
import time

from flask import Flask, jsonify, request
import urllib.request

from joserfc import jws, jwt
from joserfc.jwk import ECKey, KeySet, import_key

import serving

LOCK = threading.Lock()
OPTS = None
TOKENS = {}  # token -> (jkt, expires_at)
SEEN_JTI = set()
AS_NONCE = secrets.token_urlsafe(16)
API_NONCES = {}  # Host -> the nonce the API demands there: each origin is its own server (§9)
STATS = {"token_calls": 0, "token_nonce_demands": 0, "token_foreign_nonces": 0, "api_ok": 0, "api_nonce_demands": 0, "api_refused": {},
         "jkts": [], "jti_reused": 0, "expected_jkt_seen": False, "elsewhere_client_ids": []}
EXPECTED = {"jkt": None}

app = Flask(__name__)


class ProofError(Exception):
    pass


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def check_proof(method, url, token=None, nonce=None):
    """The checks of RFC 9449 §4.3; returns the key's thumbprint."""
    values = request.headers.getlist("DPoP")
    if len(values) != 1:
        raise ProofError("missing_proof" if not values else "several_proofs")
    proof = values[0]
    try:
        header = jws.extract_compact(proof.encode()).headers()
    except Exception:
        raise ProofError("malformed")
    if header.get("typ") != "dpop+jwt" or header.get("alg") != "ES256" or not isinstance(header.get("jwk"), dict):
        raise ProofError("bad_header")
    if "d" in header["jwk"]:
        raise ProofError("private_key_in_header")
    key = ECKey.import_key(header["jwk"])
    try:
        claims = json.loads(jws.deserialize_compact(proof, key, algorithms=["ES256"]).payload)
    except Exception:
        raise ProofError("bad_signature")
    if claims.get("htm") != method:
        raise ProofError("htm")
    if claims.get("htu") != url:
        raise ProofError("htu")
    iat = claims.get("iat")
    if not isinstance(iat, int) or abs(time.time() - iat) > 60:
        raise ProofError("iat")
    jti = claims.get("jti")
    if not isinstance(jti, str) or not jti:
        raise ProofError("jti")
    with LOCK:
        if jti in SEEN_JTI:
            STATS["jti_reused"] += 1
            raise ProofError("jti_reused")
        SEEN_JTI.add(jti)
    if token is not None and claims.get("ath") != b64(hashlib.sha256(token.encode()).digest()):
        raise ProofError("ath")
    if token is None and "ath" in claims:
        raise ProofError("ath_on_token_request")
    if nonce is not None and claims.get("nonce") != nonce:
        raise ProofError("nonce")
    return key.thumbprint()


def proof_nonce():
    """The nonce claim of the request's proof, unverified (None when absent or unreadable)."""
    try:
        payload = jws.extract_compact(request.headers.get("DPoP", "").encode()).payload
        return json.loads(payload).get("nonce")
    except Exception:
        return None


def api_nonce():
    with LOCK:
        return API_NONCES.setdefault(request.host, secrets.token_urlsafe(16))


def own_url():
    return request.base_url  # scheme, host and path; no query


DEVICE = {"polls": 0}
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"


@app.route("/oauth/device", methods=["POST"])
def device():
    """RFC 8628 §3.2; the sign-in is approved at the second poll that carries a good proof."""
    return jsonify(device_code="dc-" + secrets.token_urlsafe(8), user_code="WDJB-MJHT",
                   verification_uri=request.host_url + "device", interval=1, expires_in=60)


@app.route("/oauth/token", methods=["POST"])
def token():
    with LOCK:
        STATS["token_calls"] += 1
    grant = request.form.get("grant_type")
    if grant not in ("client_credentials", DEVICE_GRANT):
        return jsonify(error="unsupported_grant_type"), 400
    if OPTS.refuse_dpop:
        return jsonify(error="invalid_dpop_proof", error_description="DPoP proofs are not accepted here"), 400
    nonce = proof_nonce()
    if nonce is not None and nonce != AS_NONCE:
        with LOCK:
            STATS["token_foreign_nonces"] += 1
    try:
        jkt = check_proof("POST", own_url(), nonce=AS_NONCE if OPTS.as_nonce else None)
    except ProofError as e:
        if str(e) == "nonce":
            with LOCK:
                STATS["token_nonce_demands"] += 1
            return jsonify(error="use_dpop_nonce", error_description="a nonce is required"), 400, {"DPoP-Nonce": AS_NONCE}
        return jsonify(error="invalid_dpop_proof", error_description=str(e)), 400
    if grant == DEVICE_GRANT:
        with LOCK:
            DEVICE["polls"] += 1
            pending = DEVICE["polls"] < 2
        if pending:
            return jsonify(error="authorization_pending"), 400, ({"DPoP-Nonce": AS_NONCE} if OPTS.as_nonce else {})
    access = secrets.token_urlsafe(32)
    with LOCK:
        TOKENS[access] = (jkt, time.time() + OPTS.access_ttl)
        if jkt not in STATS["jkts"]:
            STATS["jkts"].append(jkt)
        if EXPECTED["jkt"] == jkt:
            STATS["expected_jkt_seen"] = True
    headers = {"DPoP-Nonce": AS_NONCE} if OPTS.as_nonce else {}
    kind = "Bearer" if OPTS.bearer else "DPoP"
    return jsonify(access_token=access, token_type=kind, expires_in=OPTS.access_ttl), 200, headers


def issued_elsewhere(access):
    """(jkt or None, expires_at) of a JWT that the --jwks-url server signed, or None."""
    if not OPTS.jwks_url:
        return None
    with urllib.request.urlopen(OPTS.jwks_url, timeout=10) as answer:
        keys = KeySet.import_key_set(json.loads(answer.read()))
    try:
        claims = jwt.decode(access, keys, algorithms=["ES256", "RS256", "PS256"]).claims
    except Exception:
        return None
    if not isinstance(claims.get("exp"), int):
        return None
    with LOCK:
        STATS["elsewhere_client_ids"].append(claims.get("client_id"))
    return ((claims.get("cnf") or {}).get("jkt"), claims["exp"])


def refuse(reason, status=401, headers=None):
    with LOCK:
        STATS["api_refused"][reason] = STATS["api_refused"].get(reason, 0) + 1
    h = {"WWW-Authenticate": 'DPoP error="invalid_token", algs="ES256"'}
    h.update(headers or {})
    return jsonify(error="invalid_token", reason=reason), status, h


@app.route("/api/<path:rest>", methods=["GET", "POST"])
def api(rest):
    header = request.headers.get("Authorization", "")
    if OPTS.bearer:
        bearer = header[7:] if header.startswith("Bearer ") else None
        entry = TOKENS.get(bearer) if bearer else None
        if bearer and entry is None:
            entry = issued_elsewhere(bearer)
            if entry is not None and (entry[0] is not None or entry[1] <= time.time()):
                entry = None  # a bound or expired token of the other server
        if entry is None:
            return refuse("not_bearer")
        with LOCK:
            STATS["api_ok"] += 1
        return jsonify(jkt=None, htu=own_url())
    if not header.startswith("DPoP "):
        return refuse("scheme")
    access = header[5:]
    entry = TOKENS.get(access) or issued_elsewhere(access)
    if entry is None or entry[1] <= time.time():
        return refuse("unknown_token")
    try:
        jkt = check_proof(request.method, own_url(), token=access, nonce=api_nonce() if OPTS.api_nonce else None)
    except ProofError as e:
        if str(e) == "nonce":
            with LOCK:
                STATS["api_nonce_demands"] += 1
            return jsonify(error="use_dpop_nonce"), 401, {
                "WWW-Authenticate": 'DPoP error="use_dpop_nonce", error_description="Resource server requires nonce in DPoP proof"',
                "DPoP-Nonce": api_nonce()}
        return refuse(str(e))
    if jkt != entry[0]:
        return refuse("jkt")
    with LOCK:
        STATS["api_ok"] += 1
    return jsonify(jkt=jkt, htu=own_url()), 200, ({"DPoP-Nonce": api_nonce()} if OPTS.api_nonce else {})


serving.add_test_controls(app, LOCK, stats=STATS)


def main():
    global OPTS
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--access-ttl", type=int, default=300)
    p.add_argument("--as-nonce", action="store_true")
    p.add_argument("--api-nonce", action="store_true")
    p.add_argument("--bearer", action="store_true")
    p.add_argument("--expect-key")
    p.add_argument("--refuse-dpop", action="store_true")
    p.add_argument("--jwks-url")
    OPTS = p.parse_args()
    if OPTS.expect_key:
        with open(OPTS.expect_key) as f:
            EXPECTED["jkt"] = import_key(f.read()).thumbprint()
    serving.announce_and_serve(serving.wsgi_server(app, OPTS.port))


if __name__ == "__main__":
    main()

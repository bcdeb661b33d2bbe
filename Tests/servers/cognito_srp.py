#!/usr/bin/env python3
"""A Cognito-compatible user pool that verifies SRP and MFA for real, for `login: srp` tests (moto 5.2.1
accepts any SRP signature and any TOTP code, so it proves neither).

The InitiateAuth and RespondToAuthChallenge calls of the Cognito API (JSON 1.1, `X-Amz-Target`):
  - USER_SRP_AUTH: SRP-6a as Cognito does it (RFC 3526's 3072-bit group, g = 2, SHA-256, HKDF "Caldera
    Derived Key"), answered with PASSWORD_VERIFIER (SALT, SRP_B, SECRET_BLOCK, USER_ID_FOR_SRP, USERNAME;
    no Session: the SECRET_BLOCK names the attempt). The answer's TIMESTAMP must be in Cognito's format
    (unpadded day) and within 5 minutes, the SECRET_BLOCK one this server gave, the signature right.
  - USER_PASSWORD_AUTH, REFRESH_TOKEN_AUTH (DEVICE_KEY required for users with device tracking).
  - After the password: NEW_PASSWORD_REQUIRED (with requiredAttributes), SELECT_MFA_TYPE,
    SOFTWARE_TOKEN_MFA (TOTP, pyotp), SMS_MFA and EMAIL_OTP (codes readable at GET /test/codes),
    MFA_SETUP, CUSTOM_CHALLENGE, each with a Session that expires after --session-ttl seconds.
  - SECRET_HASH checked the way Cognito does when --client-secret is set.
Users come from --users, a JSON list of {"username", "email"?, "password", "mfa": none|totp|sms|email|
select|setup|custom, "totp_secret"?, "force_change"?, "required_attributes"?, "device_tracking"?}.
--bad-b zero|n makes SRP_B 0 or N. GET /test/stats counts calls by kind and outcome.
Pool us-east-1_SrpPool1, client id srp-client. Prints `READY <port>`.
"""
import argparse
import base64
import datetime
import hashlib
import hmac
import json
import re
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pyotp

N_HEX = (
    "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DD"
    "EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED"
    "EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA48361C55D39A69163FA8FD24CF5F"
    "83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B"
    "E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF6955817183995497CEA956AE515D2261898FA0510"
    "15728E5A8AAAC42DAD33170D04507A33A85521ABDF1CBA64ECFB850458DBEF0A8AEA71575D060C7DB3970F85A6E1E4C7"
    "ABF5AE8CDB0933D71E8C94E04A25619DCEE3D2261AD2EE6BF12FFA06D98A0864D87602733EC86A64521F2B18177B200C"
    "BBE117577A615D6C770988C0BAD946E208E24FA074E5AB3143DB5BFCE0FD108E4B82D120A93AD2CAFFFFFFFFFFFFFFFF"
)
N = int(N_HEX, 16)
G = 2
POOL_ID = "us-east-1_SrpPool1"
POOL_NAME = POOL_ID.split("_")[1]
CLIENT_ID = "srp-client"
WEEKDAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


def padded(n):
    """Big-endian bytes, a leading zero byte when the top bit is set (Cognito's rule)."""
    return padded_hex_bytes(format(n, "x"))


def padded_hex_bytes(text):
    """The same of a number written in hex."""
    if len(text) % 2:
        text = "0" + text
    elif text[0] in "89abcdefABCDEF":
        text = "00" + text
    return bytes.fromhex(text)


def h(data):
    return int.from_bytes(hashlib.sha256(data).digest(), "big")


K = h(padded(N) + padded(G))


def password_x(salt_hex, user_id, password):
    inner = hashlib.sha256(f"{POOL_NAME}{user_id}:{password}".encode()).digest()
    return h(padded_hex_bytes(salt_hex) + inner)


def hkdf16(ikm, salt):
    prk = hmac.new(salt, ikm, hashlib.sha256).digest()
    return hmac.new(prk, b"Caldera Derived Key\x01", hashlib.sha256).digest()[:16]


def parse_timestamp(text):
    """Cognito's TIMESTAMP, strictly: `EEE MMM d HH:mm:ss UTC yyyy`, day unpadded, weekday right."""
    match = re.fullmatch(r"([A-Z][a-z]{2}) ([A-Z][a-z]{2}) ([1-9]|[12][0-9]|3[01]) (\d\d):(\d\d):(\d\d) UTC (\d{4})", text)
    if not match or match.group(2) not in MONTHS:
        return None
    moment = datetime.datetime(
        int(match.group(7)), MONTHS.index(match.group(2)) + 1, int(match.group(3)),
        int(match.group(4)), int(match.group(5)), int(match.group(6)), tzinfo=datetime.timezone.utc,
    )
    if WEEKDAYS[moment.weekday()] != match.group(1):
        return None
    return moment.timestamp()


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def fake_jwt(claims):
    head = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = b64url(json.dumps(claims).encode())
    signature = b64url(hmac.new(b"test-only", f"{head}.{body}".encode(), hashlib.sha256).digest())
    return f"{head}.{body}.{signature}"


class CognitoError(Exception):
    def __init__(self, kind, message, outcome=None):
        self.kind, self.message, self.outcome = kind, message, outcome or kind


class Pool:
    def __init__(self, users, client_secret, session_ttl, bad_b, access_ttl):
        self.lock = threading.Lock()
        self.client_secret = client_secret
        self.session_ttl = session_ttl
        self.bad_b = bad_b
        self.access_ttl = access_ttl
        self.users = {}
        for index, spec in enumerate(users):
            user = dict(spec)
            user["pool_username"] = spec["username"]
            user.setdefault("mfa", "none")
            self.set_password(user, spec["password"])
            self.users[user["pool_username"]] = user
        self.attempts = {}  # SECRET_BLOCK → SRP state
        self.sessions = {}  # Session → {"user", "pending": [...], "expires"}
        self.refresh_tokens = {}
        self.codes = {}  # pool username → last SMS/e-mail code
        self.stats = {}
        self.refresh_device_keys = []

    def set_password(self, user, password):
        user["password"] = password
        user["salt"] = secrets.token_hex(16)
        user["verifier"] = pow(G, password_x(user["salt"], user["pool_username"], password), N)

    def count(self, kind, outcome):
        by_outcome = self.stats.setdefault(kind, {})
        by_outcome[outcome] = by_outcome.get(outcome, 0) + 1

    def find(self, name):
        for user in self.users.values():
            if name in (user["pool_username"], user.get("email")):
                return user
        raise CognitoError("UserNotFoundException", "User does not exist.")

    def check_secret_hash(self, parameters, username):
        if not self.client_secret:
            return
        expected = base64.b64encode(hmac.new(self.client_secret.encode(), (username + CLIENT_ID).encode(), hashlib.sha256).digest()).decode()
        if parameters.get("SECRET_HASH") != expected:
            raise CognitoError("NotAuthorizedException", f"Unable to verify secret hash for client {CLIENT_ID}", "bad_secret_hash")

    # -- InitiateAuth

    def initiate(self, body):
        flow = body.get("AuthFlow")
        parameters = body.get("AuthParameters") or {}
        if body.get("ClientId") != CLIENT_ID:
            raise CognitoError("ResourceNotFoundException", "User pool client does not exist.")
        if flow == "REFRESH_TOKEN_AUTH":
            return self.refresh(parameters)
        user = self.find(parameters.get("USERNAME", ""))
        self.check_secret_hash(parameters, parameters["USERNAME"])
        if flow == "USER_PASSWORD_AUTH":
            if parameters.get("PASSWORD") != user["password"]:
                raise CognitoError("NotAuthorizedException", "Incorrect username or password.", "wrong_password")
            return self.after_password(user)
        if flow != "USER_SRP_AUTH":
            raise CognitoError("InvalidParameterException", f"Unsupported AuthFlow {flow}")
        big_a = int(parameters.get("SRP_A", "0") or "0", 16)
        if big_a % N == 0:
            raise CognitoError("NotAuthorizedException", "Incorrect username or password.", "bad_a")
        b = secrets.randbelow(N - 2) + 1
        big_b = (K * user["verifier"] + pow(G, b, N)) % N
        if self.bad_b == "zero":
            big_b = 0
        elif self.bad_b == "n":
            big_b = N
        block = secrets.token_bytes(48)
        self.attempts[block] = {"user": user["pool_username"], "A": big_a, "b": b, "B": big_b}
        return {
            "ChallengeName": "PASSWORD_VERIFIER",
            "ChallengeParameters": {
                "SALT": user["salt"],
                "SRP_B": format(big_b, "x"),
                "SECRET_BLOCK": base64.b64encode(block).decode(),
                "USER_ID_FOR_SRP": user["pool_username"],
                "USERNAME": user["pool_username"],
            },
        }

    def refresh(self, parameters):
        entry = self.refresh_tokens.get(parameters.get("REFRESH_TOKEN"))
        if not entry:
            raise CognitoError("NotAuthorizedException", "Invalid Refresh Token", "bad_refresh_token")
        user = self.users[entry["user"]]
        self.check_secret_hash(parameters, user["pool_username"])
        self.refresh_device_keys.append(parameters.get("DEVICE_KEY"))
        if entry.get("device_key") and parameters.get("DEVICE_KEY") != entry["device_key"]:
            raise CognitoError("NotAuthorizedException", "Invalid Refresh Token", "no_device_key")
        result = self.tokens(user, refresh=False)
        return {"AuthenticationResult": result, "ChallengeParameters": {}}

    # -- RespondToAuthChallenge

    def respond(self, body):
        name = body.get("ChallengeName")
        responses = body.get("ChallengeResponses") or {}
        if body.get("ClientId") != CLIENT_ID:
            raise CognitoError("ResourceNotFoundException", "User pool client does not exist.")
        if name == "PASSWORD_VERIFIER":
            return self.password_verifier(responses)
        state = self.sessions.pop(body.get("Session"), None)
        if state is None or state["expires"] < time.time():
            raise CognitoError("NotAuthorizedException", "Invalid session for the user, session is expired.", "expired_session")
        user = self.users[state["user"]]
        if name != state["challenge"]:
            raise CognitoError("InvalidParameterException", f"Expected {state['challenge']}")
        if responses.get("USERNAME") != user["pool_username"]:
            raise CognitoError("NotAuthorizedException", "Incorrect username or password.", "wrong_username")
        self.check_secret_hash(responses, user["pool_username"])
        if name == "NEW_PASSWORD_REQUIRED":
            new_password = responses.get("NEW_PASSWORD", "")
            if len(new_password) < 8:
                raise CognitoError("InvalidPasswordException", "Password does not conform to policy: Password not long enough")
            for attribute in user.get("required_attributes", []):
                if not responses.get(f"userAttributes.{attribute}"):
                    raise CognitoError("InvalidParameterException", f"Missing required attribute {attribute}")
                user.setdefault("attributes", {})[attribute] = responses[f"userAttributes.{attribute}"]
            self.set_password(user, new_password)
            user["force_change"] = False
            return self.after_password(user)
        if name == "SELECT_MFA_TYPE":
            choice = responses.get("ANSWER")
            if choice not in ("SMS_MFA", "SOFTWARE_TOKEN_MFA"):
                raise CognitoError("InvalidParameterException", "Invalid MFA type")
            return self.challenge(user, choice)
        if name == "SOFTWARE_TOKEN_MFA":
            if not pyotp.TOTP(user["totp_secret"]).verify(responses.get("SOFTWARE_TOKEN_MFA_CODE", ""), valid_window=1):
                raise CognitoError("CodeMismatchException", "Invalid code received for user")
            return self.signed_in(user)
        if name in ("SMS_MFA", "EMAIL_OTP"):
            key = "SMS_MFA_CODE" if name == "SMS_MFA" else "EMAIL_OTP_CODE"
            if responses.get(key) != self.codes.get(user["pool_username"]):
                raise CognitoError("CodeMismatchException", "Invalid code received for user")
            return self.signed_in(user)
        raise CognitoError("InvalidParameterException", f"Cannot answer {name} here")

    def password_verifier(self, responses):
        try:
            block = base64.b64decode(responses.get("PASSWORD_CLAIM_SECRET_BLOCK", ""), validate=True)
        except ValueError:
            block = b""
        attempt = self.attempts.pop(block, None)
        if attempt is None:
            raise CognitoError("NotAuthorizedException", "Incorrect username or password.", "bad_secret_block")
        user = self.users[attempt["user"]]
        if responses.get("USERNAME") != user["pool_username"]:
            raise CognitoError("NotAuthorizedException", "Incorrect username or password.", "wrong_username")
        self.check_secret_hash(responses, user["pool_username"])
        stamp = parse_timestamp(responses.get("TIMESTAMP", ""))
        if stamp is None or abs(stamp - time.time()) > 300:
            raise CognitoError("NotAuthorizedException", "Incorrect username or password.", "bad_timestamp")
        u = h(padded(attempt["A"]) + padded(attempt["B"]))
        shared = pow(attempt["A"] * pow(user["verifier"], u, N), attempt["b"], N)
        key = hkdf16(padded(shared), padded(u))
        message = POOL_NAME.encode() + user["pool_username"].encode() + block + responses["TIMESTAMP"].encode()
        expected = base64.b64encode(hmac.new(key, message, hashlib.sha256).digest()).decode()
        if not hmac.compare_digest(expected, responses.get("PASSWORD_CLAIM_SIGNATURE", "")):
            raise CognitoError("NotAuthorizedException", "Incorrect username or password.", "bad_signature")
        return self.after_password(user)

    # -- what follows a right password

    def after_password(self, user):
        if user.get("force_change"):
            return self.challenge(
                user, "NEW_PASSWORD_REQUIRED",
                {
                    "userAttributes": json.dumps({"email": user.get("email", "")}),
                    "requiredAttributes": json.dumps([f"userAttributes.{a}" for a in user.get("required_attributes", [])]),
                },
            )
        return self.signed_in(user)

    def signed_in(self, user):
        """A right password (or an answered MFA): the user's MFA challenge once, then tokens."""
        if user["mfa"] == "none" or user.pop("_mfa_done", False):
            return {"AuthenticationResult": self.tokens(user), "ChallengeParameters": {}}
        user["_mfa_done"] = True
        names = {"totp": "SOFTWARE_TOKEN_MFA", "sms": "SMS_MFA", "email": "EMAIL_OTP", "select": "SELECT_MFA_TYPE",
                 "setup": "MFA_SETUP", "custom": "CUSTOM_CHALLENGE"}
        return self.challenge(user, names[user["mfa"]])

    def challenge(self, user, name, parameters=None):
        parameters = dict(parameters or {})
        if name == "SMS_MFA":
            self.codes[user["pool_username"]] = f"{secrets.randbelow(10**6):06d}"
            parameters.update(CODE_DELIVERY_DELIVERY_MEDIUM="SMS", CODE_DELIVERY_DESTINATION="+*******0100")
        elif name == "EMAIL_OTP":
            self.codes[user["pool_username"]] = f"{secrets.randbelow(10**6):06d}"
            parameters.update(CODE_DELIVERY_DELIVERY_MEDIUM="EMAIL", CODE_DELIVERY_DESTINATION="a***@e***")
        elif name == "SELECT_MFA_TYPE":
            parameters["MFAS_CAN_CHOOSE"] = json.dumps(["SMS_MFA", "SOFTWARE_TOKEN_MFA"])
        parameters["USERNAME"] = user["pool_username"]
        session = secrets.token_urlsafe(48)
        self.sessions[session] = {"user": user["pool_username"], "challenge": name, "expires": time.time() + self.session_ttl}
        return {"ChallengeName": name, "ChallengeParameters": parameters, "Session": session}

    def tokens(self, user, refresh=True):
        now = int(time.time())
        sub = "sub-" + user["pool_username"]
        access = fake_jwt({"sub": sub, "username": user["pool_username"], "token_use": "access", "iat": now, "exp": now + self.access_ttl, "jti": secrets.token_hex(8)})
        result = {"AccessToken": access, "ExpiresIn": self.access_ttl, "TokenType": "Bearer"}
        result["IdToken"] = fake_jwt({"sub": sub, "cognito:username": user["pool_username"], "email": user.get("email", ""), "iat": now, "exp": now + self.access_ttl})
        if refresh:
            token = secrets.token_urlsafe(32)
            entry = {"user": user["pool_username"]}
            if user.get("device_tracking"):
                entry["device_key"] = f"us-east-1_{secrets.token_hex(8)}"
                result["NewDeviceMetadata"] = {"DeviceKey": entry["device_key"], "DeviceGroupKey": "-grp"}
            self.refresh_tokens[token] = entry
            result["RefreshToken"] = token
        return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--users", required=True)
    parser.add_argument("--client-secret")
    parser.add_argument("--session-ttl", type=float, default=180)
    parser.add_argument("--access-ttl", type=int, default=3600)
    parser.add_argument("--bad-b", choices=["zero", "n"])
    args = parser.parse_args()
    pool = Pool(json.loads(args.users), args.client_secret, args.session_ttl, args.bad_b, args.access_ttl)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format, *a):
            pass

        def send(self, status, value, kind=None):
            body = json.dumps(value).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/x-amz-json-1.1")
            self.send_header("Content-Length", str(len(body)))
            if kind:
                self.send_header("x-amzn-ErrorType", kind)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            with pool.lock:
                if self.path == "/test/stats":
                    return self.send(200, {"calls": pool.stats, "refresh_device_keys": pool.refresh_device_keys})
                if self.path == "/test/codes":
                    return self.send(200, pool.codes)
            self.send(404, {})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
            target = self.headers.get("X-Amz-Target", "").split(".")[-1]
            kind = target + ":" + str(body.get("AuthFlow") or body.get("ChallengeName"))
            with pool.lock:
                try:
                    if target == "InitiateAuth":
                        answer = pool.initiate(body)
                    elif target == "RespondToAuthChallenge":
                        answer = pool.respond(body)
                    else:
                        raise CognitoError("UnknownOperationException", target)
                except CognitoError as error:
                    pool.count(kind, error.outcome)
                    return self.send(400, {"__type": error.kind, "message": error.message}, error.kind)
                pool.count(kind, "challenge" if "ChallengeName" in answer else "ok")
            self.send(200, answer)

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"READY {server.server_port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()

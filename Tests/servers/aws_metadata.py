#!/usr/bin/env python3
"""Small fakes of the AWS credential endpoints, for the `type: aws` sources' tests, as documented:
- STS AssumeRoleWithWebIdentity (POST /sts/, the query protocol, XML answers;
  https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRoleWithWebIdentity.html): every
  WebIdentityToken received is recorded; the token "refuse-me" gets 400 InvalidIdentityToken.
- The container credentials endpoint (GET /container/creds): `Authorization` must equal
  --container-token, else 401.
- IMDSv2 (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/configuring-instance-metadata-service.html):
  PUT /latest/api/token with X-aws-ec2-metadata-token-ttl-seconds gives a token; the metadata GETs
  without a valid X-aws-ec2-metadata-token get 401 (as IMDS does when v2 is required).
With --container-sequence FILE (a JSON list of {"AccessKeyId", "SecretAccessKey", "Token"?,
"lifetime": seconds, "delay": seconds}), the container endpoint answers the list's entries in turn
(the last one again and again), each expiring `lifetime` seconds after it is served, after waiting
`delay` seconds: the refresh-at-expiry tests.
With --steady-expiration, the container endpoint and IMDS answer the same keys with the same
Expiration every time, as ECS, EKS and IMDS do until they rotate the keys (without it, each answer
expires an hour after it is served).
GET /calls answers what was asked, as JSON: {"sts": [tokens], "container": [authorizations],
"imds_tokens": n, "imds_gets": n, "imds_refused": n}.

    aws_metadata.py --port 0 --container-token TOKEN
"""

import argparse
import datetime
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
import serving

CALLS = {"sts": [], "container": [], "imds_tokens": 0, "imds_gets": 0, "imds_refused": 0}
IMDS_TOKENS = set()
LOCK = threading.Lock()
ROLE = "reader-role"


SEQUENCE = []
# --steady-expiration: the one Expiration every answer carries (None: an hour after each answer).
STEADY_EXPIRATION = None


def expiration(seconds=3600):
    return (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def steady_or_new_expiration():
    return STEADY_EXPIRATION or expiration()


def sequence_answer(n):
    entry = dict(SEQUENCE[min(n, len(SEQUENCE)) - 1])
    delay = entry.pop("delay", 0)
    if delay:
        threading.Event().wait(delay)
    entry["Expiration"] = expiration(entry.pop("lifetime", 3600))
    return json.dumps(entry)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    container_token = None

    def log_message(self, *args):
        pass

    def answer(self, status, body, content_type="application/json"):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        length = int(self.headers.get("Content-Length", "0"))
        return self.rfile.read(length) if length else b""

    def do_POST(self):
        form = urllib.parse.parse_qs(self.body().decode())
        if self.path != "/sts/" or form.get("Action") != ["AssumeRoleWithWebIdentity"]:
            self.answer(404, "{}")
            return
        token = form.get("WebIdentityToken", [""])[0]
        with LOCK:
            CALLS["sts"].append({"token": token, "role": form.get("RoleArn", [""])[0], "session": form.get("RoleSessionName", [""])[0]})
            n = len(CALLS["sts"])
        if token == "refuse-me":
            self.answer(400, "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><Error><Type>Sender</Type>"
                        "<Code>InvalidIdentityToken</Code><Message>Couldn't retrieve verification key from your identity provider</Message>"
                        "</Error><RequestId>r</RequestId></ErrorResponse>", "text/xml")
            return
        self.answer(200, f"""<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <SubjectFromWebIdentityToken>system:serviceaccount:default:app</SubjectFromWebIdentityToken>
    <Credentials>
      <SessionToken>web-session-{n}</SessionToken>
      <SecretAccessKey>web/secret+{n}</SecretAccessKey>
      <Expiration>{expiration()}</Expiration>
      <AccessKeyId>ASIAWEB{n}</AccessKeyId>
    </Credentials>
    <AssumedRoleUser><Arn>arn:aws:sts::123456789012:assumed-role/reader/x</Arn><AssumedRoleId>AROA:x</AssumedRoleId></AssumedRoleUser>
  </AssumeRoleWithWebIdentityResult>
  <ResponseMetadata><RequestId>r</RequestId></ResponseMetadata>
</AssumeRoleWithWebIdentityResponse>""", "text/xml")

    def do_PUT(self):
        self.body()
        if self.path != "/latest/api/token" or not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
            self.answer(400, "")
            return
        with LOCK:
            CALLS["imds_tokens"] += 1
            token = f"imds-token-{CALLS['imds_tokens']}"
            IMDS_TOKENS.add(token)
        self.answer(200, token, "text/plain")

    def do_GET(self):
        if self.path == "/calls":
            with LOCK:
                self.answer(200, json.dumps(CALLS))
            return
        if self.path == "/container/creds":
            authorization = self.headers.get("Authorization")
            with LOCK:
                CALLS["container"].append(authorization)
                n = len(CALLS["container"])
            if authorization != self.container_token:
                self.answer(401, '{"message":"bad token"}')
                return
            if SEQUENCE:
                self.answer(200, sequence_answer(n))
                return
            self.answer(200, json.dumps({"AccessKeyId": "ASIACONTAINER", "SecretAccessKey": "container/secret",
                                         "Token": "container-session", "Expiration": steady_or_new_expiration()}))
            return
        if self.path.startswith("/latest/meta-data/iam/security-credentials/"):
            with LOCK:
                if self.headers.get("X-aws-ec2-metadata-token") not in IMDS_TOKENS:
                    CALLS["imds_refused"] += 1
                    self.answer(401, "", "text/plain")
                    return
                CALLS["imds_gets"] += 1
            rest = self.path[len("/latest/meta-data/iam/security-credentials/"):]
            if rest == "":
                self.answer(200, ROLE, "text/plain")
            elif rest == ROLE:
                self.answer(200, json.dumps({"Code": "Success", "LastUpdated": expiration(), "Type": "AWS-HMAC",
                                             "AccessKeyId": "ASIAIMDS", "SecretAccessKey": "imds/secret",
                                             "Token": "imds-session", "Expiration": steady_or_new_expiration()}))
            else:
                self.answer(404, "", "text/plain")
            return
        self.answer(404, "{}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--container-token", default="container-auth-token")
    parser.add_argument("--container-sequence", help="a JSON file: the credentials the container endpoint answers in turn")
    parser.add_argument("--steady-expiration", action="store_true", help="the same Expiration in every answer")
    args = parser.parse_args()
    Handler.container_token = args.container_token
    if args.steady_expiration:
        global STEADY_EXPIRATION
        STEADY_EXPIRATION = expiration()
    if args.container_sequence:
        with open(args.container_sequence) as handle:
            SEQUENCE.extend(json.load(handle))
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    serving.serve_until_stopped(server)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""moto_server as a SigV4 verifier, for the signer's tests (CONTRACT.md "AWS credentials and SigV4
signing"; moto's limits are in the test servers' notes: only plain keys and query values verify).

    moto_sigv4.py --port 0 --info-file PATH [--no-auth]

Starts moto with INITIAL_NO_AUTH_ACTION_COUNT=3, spends those three unsigned actions on an IAM
user allowed everything and its access key, then (signed by botocore with that key) makes a role
the user may assume and assumes it for temporary credentials. Writes {"endpoint", "region",
"access_key_id", "secret_access_key", "role_arn", "session": {access_key_id,
secret_access_key, session_token}} to PATH and prints `READY <port>`. Stops on SIGTERM or when its parent leaves.
"""

import argparse
import json
import os
import sys

import serving

# moto reads it when imported: every action after the first three is checked. With --no-auth (the
# web-identity tests: moto cannot take AssumeRoleWithWebIdentity with auth on) nothing is checked.
if "--no-auth" not in sys.argv:
    os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = "3"
os.environ.setdefault("AWS_ACCESS_KEY_ID", "unused")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "unused")

import boto3  # noqa: E402
from moto.server import ThreadedMotoServer  # noqa: E402

REGION = "us-east-1"
ALLOW_ALL = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--info-file", required=True)
    parser.add_argument("--no-auth", action="store_true", help="check no signature; write only the endpoint")
    args = parser.parse_args()

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=args.port, verbose=False)
    server.start()
    _, port = server.get_host_and_port()
    endpoint = f"http://127.0.0.1:{port}"
    if args.no_auth:
        write_info(args.info_file, {"endpoint": endpoint})
        serving.wait_until_stopped(server, port)
        return

    iam = boto3.client("iam", region_name=REGION, endpoint_url=endpoint)
    user = iam.create_user(UserName="signer")["User"]
    iam.put_user_policy(UserName="signer", PolicyName="all", PolicyDocument=ALLOW_ALL)
    key = iam.create_access_key(UserName="signer")["AccessKey"]

    signed = dict(
        region_name=REGION, endpoint_url=endpoint,
        aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"],
    )
    trust = json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"AWS": user["Arn"]}, "Action": "sts:AssumeRole"}]})
    iam_signed = boto3.client("iam", **signed)
    role = iam_signed.create_role(RoleName="reader", AssumeRolePolicyDocument=trust)["Role"]
    iam_signed.put_role_policy(RoleName="reader", PolicyName="all", PolicyDocument=ALLOW_ALL)
    assumed = boto3.client("sts", **signed).assume_role(RoleArn=role["Arn"], RoleSessionName="tests")["Credentials"]

    info = {
        "endpoint": endpoint,
        "region": REGION,
        "access_key_id": key["AccessKeyId"],
        "secret_access_key": key["SecretAccessKey"],
        "role_arn": role["Arn"],
        "session": {
            "access_key_id": assumed["AccessKeyId"],
            "secret_access_key": assumed["SecretAccessKey"],
            "session_token": assumed["SessionToken"],
        },
    }
    write_info(args.info_file, info)
    serving.wait_until_stopped(server, port)


def write_info(path, info):
    temporary = path + ".tmp"
    with open(temporary, "w") as handle:
        json.dump(info, handle)
    os.replace(temporary, path)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""A Cognito user pool for the CognitoProvider tests: moto's server on a free port, with pools,
clients and users made through boto3.

    moto_cognito.py --port 0 --info-file PATH

Writes everything the tests need as one JSON object to PATH, then prints `READY <port>` (the line
Tests/TestSupport/PythonServer.swift waits for; it reads a port number, so the details go to the
file rather than onto the READY line). Stops on SIGTERM.

What moto 5.2.1 does (read from moto/cognitoidp/models.py and checked by the tests):
- InitiateAuth supports USER_PASSWORD_AUTH and REFRESH_TOKEN_AUTH; answers carry AccessToken, IdToken,
  ExpiresIn (3600) and, for a login only, RefreshToken. Errors are HTTP 400 with
  {"__type": "NotAuthorizedException" | "UserNotFoundException" | "ResourceNotFoundException", "message": …}.
- USER_PASSWORD_AUTH does not check SECRET_HASH at all; REFRESH_TOKEN_AUTH does, with the user name
  that was given at login.
- A user made by admin_create_user with only a temporary password is FORCE_CHANGE_PASSWORD and gets a
  NEW_PASSWORD_REQUIRED challenge; admin_set_user_password(Permanent=True) confirms it.
- AliasAttributes (sign in by an e-mail alias) is not honoured at login; UsernameAttributes=["email"]
  is: the user's pool name is then a generated UUID (the access token's `username` claim = `sub`),
  unlike the e-mail used to sign in. Real Cognito computes the refresh SECRET_HASH with that pool
  name, moto with the login name, so a secret client in an e-mail pool cannot be tested against moto.
- RevokeToken is not implemented (the operation is unknown to moto).
"""

import argparse
import json
import os
import sys

import serving

os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

import boto3  # noqa: E402
from moto.server import ThreadedMotoServer  # noqa: E402

REGION = "us-east-1"
FLOWS = ["ALLOW_USER_PASSWORD_AUTH", "ALLOW_REFRESH_TOKEN_AUTH"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--info-file", required=True)
    args = parser.parse_args()

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=args.port, verbose=False)
    server.start()
    _, port = server.get_host_and_port()
    endpoint = f"http://127.0.0.1:{port}"
    idp = boto3.client("cognito-idp", region_name=REGION, endpoint_url=endpoint)

    # Pool 1: plain user names.
    pool = idp.create_user_pool(PoolName="tokenproxy-tests")["UserPool"]["Id"]
    public_client = idp.create_user_pool_client(
        UserPoolId=pool, ClientName="public", ExplicitAuthFlows=FLOWS
    )["UserPoolClient"]
    secret_client = idp.create_user_pool_client(
        UserPoolId=pool, ClientName="confidential", GenerateSecret=True, ExplicitAuthFlows=FLOWS
    )["UserPoolClient"]
    username, password = "alice", "Correct-Horse-9"
    idp.admin_create_user(UserPoolId=pool, Username=username, TemporaryPassword="Temporary-1")
    idp.admin_set_user_password(UserPoolId=pool, Username=username, Password=password, Permanent=True)
    new_user, new_password = "bob", "Temporary-2"
    idp.admin_create_user(UserPoolId=pool, Username=new_user, TemporaryPassword=new_password)

    # Pool 2: users sign in with their e-mail address; the pool's own name is a UUID.
    email_pool = idp.create_user_pool(PoolName="tokenproxy-email", UsernameAttributes=["email"])["UserPool"]["Id"]
    email_client = idp.create_user_pool_client(
        UserPoolId=email_pool, ClientName="public", ExplicitAuthFlows=FLOWS
    )["UserPoolClient"]
    email, email_password = "carol@example.com", "Correct-Horse-7"
    created = idp.admin_create_user(UserPoolId=email_pool, Username=email, TemporaryPassword="Temporary-3")
    idp.admin_set_user_password(UserPoolId=email_pool, Username=email, Password=email_password, Permanent=True)

    info = {
        "endpoint": endpoint + "/",
        "region": REGION,
        "pool_id": pool,
        "client_id": public_client["ClientId"],
        "secret_client_id": secret_client["ClientId"],
        "client_secret": secret_client["ClientSecret"],
        "username": username,
        "password": password,
        "new_password_user": new_user,
        "new_password_password": new_password,
        "email_pool_id": email_pool,
        "email_client_id": email_client["ClientId"],
        "email": email,
        "email_password": email_password,
        "email_pool_username": created["User"]["Username"],
    }
    temporary = args.info_file + ".tmp"
    with open(temporary, "w") as handle:
        json.dump(info, handle)
    os.replace(temporary, args.info_file)

    serving.wait_until_stopped(server, port)


if __name__ == "__main__":
    main()

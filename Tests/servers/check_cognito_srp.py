#!/usr/bin/env python3
"""Checks cognito_srp.py against a third-party SRP client, pycognito's AWSSRP (through boto3 with
`endpoint_url`): the right password signs in; a wrong password, a stale TIMESTAMP and a wrong
SECRET_BLOCK in pycognito's own answer are refused. Prints one line per check and exits 0 when every
check came out as Cognito would answer it.

  check_cognito_srp.py ENDPOINT USERNAME PASSWORD
"""
import base64
import sys

import boto3
from botocore.exceptions import ClientError
from pycognito.aws_srp import AWSSRP

POOL_ID = "us-east-1_SrpPool1"
CLIENT_ID = "srp-client"


def main():
    endpoint, username, password = sys.argv[1:4]
    client = boto3.client(
        "cognito-idp", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="test", aws_secret_access_key="test"
    )
    tokens = AWSSRP(username=username, password=password, pool_id=POOL_ID, client_id=CLIENT_ID, client=client).authenticate_user()
    good = "AccessToken" in tokens.get("AuthenticationResult", {})
    print("right password:", "signed in" if good else "no tokens")
    try:
        AWSSRP(username=username, password=password + "x", pool_id=POOL_ID, client_id=CLIENT_ID, client=client).authenticate_user()
        refused = False
    except ClientError as error:
        refused = error.response["Error"]["Code"] == "NotAuthorizedException"
    print("wrong password:", "refused" if refused else "accepted")
    results = [good, refused]
    for name, change in [
        ("stale TIMESTAMP", lambda r: r.update(TIMESTAMP="Tue Jan 2 03:04:05 UTC 2024")),
        ("wrong SECRET_BLOCK", lambda r: r.update(PASSWORD_CLAIM_SECRET_BLOCK=base64.b64encode(b"x" * 48).decode())),
    ]:
        srp = AWSSRP(username=username, password=password, pool_id=POOL_ID, client_id=CLIENT_ID, client=client)
        parameters = srp.get_auth_params()
        challenge = client.initiate_auth(AuthFlow="USER_SRP_AUTH", AuthParameters=parameters, ClientId=CLIENT_ID)
        responses = srp.process_challenge(challenge["ChallengeParameters"], parameters)
        change(responses)
        try:
            client.respond_to_auth_challenge(ClientId=CLIENT_ID, ChallengeName="PASSWORD_VERIFIER", ChallengeResponses=responses)
            ok = False
        except ClientError as error:
            ok = error.response["Error"]["Code"] == "NotAuthorizedException"
        print(f"{name}:", "refused" if ok else "accepted")
        results.append(ok)
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Checks cognito_srp.py against a third-party SRP client, pycognito's AWSSRP (through boto3 with
`endpoint_url`): the right password signs in, a wrong one is refused. Prints one line per check and
exits 0 when both came out as Cognito would answer them.

  check_cognito_srp.py ENDPOINT USERNAME PASSWORD
"""
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
    return 0 if good and refused else 1


if __name__ == "__main__":
    sys.exit(main())

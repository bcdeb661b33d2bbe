#!/usr/bin/env python3
"""Python requests behind a forward proxy, run by tokenproxy's end-to-end tests: the proxy and the
CA come from the environment as a user sets them (HTTPS_PROXY, REQUESTS_CA_BUNDLE).

`requests_client.py URL [URL ...]`: on one Session (keep-alive), GETs each URL, then POSTs 200 KB
to the first. Prints one JSON object on stdout:
{"results": [{"status", "body"}], "post": {"status", "body"}, "error": "..."}
"""
import json
import sys

import requests


def main():
    out = {"results": [], "post": None, "error": None}
    try:
        with requests.Session() as session:
            for url in sys.argv[1:]:
                answer = session.get(url, timeout=30)
                out["results"].append({"status": answer.status_code, "body": answer.text})
            body = bytes(range(256)) * 800
            answer = session.post(sys.argv[1], data=body, timeout=30)
            out["post"] = {"status": answer.status_code, "body": answer.text}
    except Exception as error:  # reported, not raised: the test prints it
        out["error"] = "%s: %s" % (type(error).__name__, error)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()

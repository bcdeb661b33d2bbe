#!/usr/bin/env python3
"""A WebSocket client on the `websockets` package, run by tokenproxy's end-to-end tests.

`ws_client.py URL [URL ...]`: on each URL, one connection that sends a text message, a binary
message with every byte value, and a 1 MiB binary message, checks that each comes back
unchanged, and closes with code 1000. Prints one JSON object on stdout:
{"ok": bool, "connections": [{"echoed": N, "close_code": C}, ...], "error": "..."}.
"""
import json
import os
import sys

from websockets.sync.client import connect


def one(url):
    messages = ["hello through the tunnel ✓", bytes(range(256)) * 4, os.urandom(1 << 20)]
    echoed = 0
    with connect(url, max_size=None, compression=None, open_timeout=30, close_timeout=10) as ws:
        for message in messages:
            ws.send(message)
            back = ws.recv(timeout=30)
            if back != message:
                raise AssertionError("message %d came back changed (%d vs %d)" % (echoed, len(back), len(message)))
            echoed += 1
        ws.close(1000, "done")
        code = ws.close_code
    return {"echoed": echoed, "close_code": code}


def main():
    result = {"ok": True, "connections": []}
    try:
        for url in sys.argv[1:]:
            result["connections"].append(one(url))
    except Exception as error:  # reported, not raised: the test prints it
        result["ok"] = False
        result["error"] = "%s: %s" % (type(error).__name__, error)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()

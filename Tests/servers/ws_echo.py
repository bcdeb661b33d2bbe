#!/usr/bin/env python3
"""A WebSocket echo server on the `websockets` package, for tokenproxy's Upgrade tunnel tests.

Run with `--port 0`; prints `READY <port>` on stdout once listening. Every text or binary message
is sent back as it came. Each handshake request's Authorization header is recorded. Plain HTTP
(no Upgrade) is answered by paths ending in:
  /_stats     JSON {"authorizations": [...], "upgrades": N, "plain": N}  (ask directly)
  /forbidden  403, also for an upgrade request
  anything else without Upgrade: 200 "plain <path>"
"""
import argparse
import asyncio
import json
import sys

from websockets.asyncio.server import serve
from websockets.datastructures import Headers
from websockets.http11 import Response

stats = {"authorizations": [], "upgrades": 0, "plain": 0}


def is_upgrade(request):
    return "websocket" in request.headers.get("Upgrade", "").lower()


def answer(status, reason, text, content_type="text/plain"):
    body = text.encode()
    headers = Headers([("Content-Type", content_type), ("Content-Length", str(len(body)))])
    return Response(status, reason, headers, body)


def process_request(connection, request):
    if request.path.startswith("/_stats"):
        return answer(200, "OK", json.dumps(stats), "application/json")
    stats["authorizations"].append(request.headers.get("Authorization"))
    if request.path.endswith("/forbidden"):
        return answer(403, "Forbidden", "forbidden\n")
    if not is_upgrade(request):
        stats["plain"] += 1
        return answer(200, "OK", "plain %s\n" % request.path)
    stats["upgrades"] += 1
    return None


async def echo(websocket):
    try:
        async for message in websocket:
            await websocket.send(message)
    except Exception:
        pass


async def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    async with serve(echo, args.host, args.port, process_request=process_request, max_size=None, compression=None) as server:
        port = server.sockets[0].getsockname()[1]
        print("READY %d" % port, flush=True)
        await asyncio.Future()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)

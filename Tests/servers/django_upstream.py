"""A Django application on gunicorn: an upstream as many real APIs run it (a WSGI stack), to see what a
request body looks like to the application behind tokenproxy.

Django reads `request.body` by CONTENT_LENGTH only: a chunked request body (no Content-Length) reads as
empty. So this server shows whether the proxy sent the body the way such an application can read it.

  POST|PUT /echo          {"method", "body_len", "body_sha256", "content_length", "transfer_encoding",
                           "x_forwarded_for"} as Django saw them
  POST /test/reject-seen  every bearer token presented so far gets 401 from now on (server-side
                          invalidation: the proxy refreshes and retries once)
  GET  /test/stats        {"requests": N, "unauthorized": N}

Prints `READY <port>` on stdout once gunicorn listens (one worker process, threads, so the state above is
shared by every request).
"""
import argparse
import hashlib
import json
import socket
import sys
import threading

import django
from django.conf import settings
from django.http import HttpResponse
from django.urls import path

LOCK = threading.Lock()
STATE = {"requests": 0, "unauthorized": 0, "seen": set(), "rejected": set()}


def json_response(value, status=200):
    return HttpResponse(json.dumps(value), status=status, content_type="application/json")


def echo(request):
    authorization = request.META.get("HTTP_AUTHORIZATION", "")
    token = hashlib.sha256(authorization.encode()).hexdigest()
    with LOCK:
        STATE["requests"] += 1
        refused = token in STATE["rejected"]
        STATE["seen"].add(token)
        if refused:
            STATE["unauthorized"] += 1
    if refused:
        response = json_response({"error": "invalid_token"}, status=401)
        response["WWW-Authenticate"] = 'Bearer error="invalid_token"'
        return response
    body = request.body
    return json_response(
        {
            "method": request.method,
            "body_len": len(body),
            "body_sha256": hashlib.sha256(body).hexdigest(),
            "content_length": request.META.get("CONTENT_LENGTH"),
            "transfer_encoding": request.META.get("HTTP_TRANSFER_ENCODING"),
            "x_forwarded_for": request.META.get("HTTP_X_FORWARDED_FOR"),
        }
    )


def reject_seen(request):
    with LOCK:
        STATE["rejected"] |= STATE["seen"]
    return json_response({"ok": True})


def stats(request):
    with LOCK:
        return json_response({"requests": STATE["requests"], "unauthorized": STATE["unauthorized"]})


urlpatterns = [
    path("echo", echo),
    path("test/reject-seen", reject_seen),
    path("test/stats", stats),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()

    settings.configure(
        DEBUG=False,
        SECRET_KEY="test-only",
        ALLOWED_HOSTS=["*"],
        ROOT_URLCONF=__name__,
        MIDDLEWARE=[],
        INSTALLED_APPS=[],
        # The test bodies are larger than Django's 2.5 MB default guard is meant for.
        DATA_UPLOAD_MAX_MEMORY_SIZE=None,
    )
    django.setup()
    from django.core.wsgi import get_wsgi_application
    from gunicorn.app.base import BaseApplication

    # The listening socket is made here (port 0: the kernel picks a free one) and handed to gunicorn
    # by descriptor, so the port printed is the one listened on, with no window for another process.
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", args.port))
    listener.listen(128)
    listener.set_inheritable(True)
    port = listener.getsockname()[1]
    application = get_wsgi_application()

    class Server(BaseApplication):
        def load_config(self):
            self.cfg.set("bind", [f"fd://{listener.fileno()}"])
            self.cfg.set("workers", 1)
            self.cfg.set("worker_class", "gthread")
            self.cfg.set("threads", 8)
            self.cfg.set("loglevel", "warning")
            self.cfg.set("when_ready", lambda _server: print(f"READY {port}", flush=True))

        def load(self):
            return application

    Server().run()


if __name__ == "__main__":
    sys.exit(main())

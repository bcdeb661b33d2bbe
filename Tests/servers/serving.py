"""How the test servers run under the Swift test process: READY <port> on stdout once listening, a
clean stop on SIGTERM, and an exit when the parent test process is gone."""
import contextlib
import json
import os
import signal
import sys
import threading


def serve_until_stopped(server):
    # The Swift test process starts its children with SIGTERM blocked (a blocked signal survives exec).
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print(f"READY {server.server_address[1]}", flush=True)
    parent = os.getppid()

    def leave_with_parent():
        while os.getppid() == parent:
            threading.Event().wait(1)
        server.shutdown()

    threading.Thread(target=leave_with_parent, daemon=True).start()
    server.serve_forever()


def wsgi_server(app, port, verbose=False):
    """A threaded werkzeug server for a Flask `app` on 127.0.0.1 (`port` 0: a free one), quiet
    unless `verbose`."""
    import logging

    from werkzeug.serving import make_server

    if not verbose:
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
    return make_server("127.0.0.1", port, app, threaded=True)


def add_test_controls(app, lock, reset_stats=None, state=None, stats=None):
    """The control endpoints the Flask test servers share, each under `lock`: with `stats`, GET
    /test/stats answers it; with `reset_stats`, POST /test/reset-stats calls it; with `state`, POST
    /test/down and /test/up set `state["down"]`, which the server's own endpoints read to answer 503."""
    from flask import jsonify

    if stats is not None:
        def answer_stats():
            with lock:
                return jsonify(stats)

        app.add_url_rule("/test/stats", "test_stats", answer_stats)
    if reset_stats is not None:
        def reset():
            with lock:
                reset_stats()
            return jsonify({"ok": True})

        app.add_url_rule("/test/reset-stats", "test_reset_stats", reset, methods=["POST"])
    if state is not None:
        def setting_down(down):
            def handler():
                state["down"] = down
                return jsonify({"ok": True})
            return handler

        app.add_url_rule("/test/down", "test_down", setting_down(True), methods=["POST"])
        app.add_url_rule("/test/up", "test_up", setting_down(False), methods=["POST"])


@contextlib.contextmanager
def counting_in_flight(lock, gauge, key, stats):
    """Counts a request in `gauge[key]` while it runs (under `lock`), and the most at once in
    stats["max_concurrent"]: how the tests see concurrent calls."""
    with lock:
        gauge[key] += 1
        stats["max_concurrent"] = max(stats["max_concurrent"], gauge[key])
    try:
        yield
    finally:
        with lock:
            gauge[key] -= 1


def serve_tls(server, cert, key, client_ca=None):
    """Wraps `server`'s listening socket in TLS with the certificate chain `cert` and its `key`;
    with `client_ca`, a client certificate signed by it is required (mTLS)."""
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    if client_ca:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(client_ca)
    server.socket = context.wrap_socket(server.socket, server_side=True)


def announce_and_serve(httpd):
    """READY <port> on stdout, then serve until the process ends."""
    print("READY %d" % httpd.server_port, flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass


def exit_at_once_on_sigterm():
    """A server with nothing to save stops at once on SIGTERM."""
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))


def send_json(handler, status, payload, content_type="application/json"):
    """Answers a BaseHTTPRequestHandler's request with `payload` as JSON."""
    send(handler, status, json.dumps(payload).encode(), content_type)


def send(handler, status, body, content_type):
    """Answers a BaseHTTPRequestHandler's request with `body` and its Content-Length (no body to a
    HEAD, RFC 9110 §9.3.2)."""
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(body)


def wait_until_stopped(server, port):
    """The same for a server that runs on threads of its own (moto's ThreadedMotoServer): READY
    <port>, then wait for SIGTERM, SIGINT or the parent's end, stop it and exit."""
    stop = threading.Event()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    print(f"READY {port}", flush=True)
    parent = os.getppid()
    while not stop.wait(1) and os.getppid() == parent:
        pass
    server.stop()
    sys.exit(0)

"""How the test servers run under the Swift test process: READY <port> on stdout once listening, a
clean stop on SIGTERM, and an exit when the parent test process is gone."""
import os
import signal
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

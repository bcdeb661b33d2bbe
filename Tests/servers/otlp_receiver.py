#!/usr/bin/env python3
"""An OTLP/HTTP receiver for the telemetry tests (CONTRACT.md "Telemetry"): it decodes what the
proxy exports with the official protobuf definitions (PyPI opentelemetry-proto), not with the
proxy's own encoder, and keeps every span and log record as JSON.

Run with `--port 0`: prints `READY <port>` on stdout once listening on 127.0.0.1.

  POST /v1/traces   ExportTraceServiceRequest (application/x-protobuf); kept unless refusing
  POST /v1/logs     ExportLogsServiceRequest; the same
  POST /test/mode?delay=S&status=N   each export waits S seconds, then answers N (200: kept)
  GET  /test/seen   {"spans": [...], "logs": [...], "resources": [...], "headers": [...],
                     "exports": every export received, "refused": those not answered 200,
                     "peers": each export's client port,
                     "counted": {path: spans or records} with --count-only, which keeps none}
"""
import argparse
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1 import trace_pb2

import serving

LOCK = threading.Lock()
STATE = {"delay": 0.0, "status": 200, "spans": [], "logs": [], "resources": [], "headers": [], "exports": 0, "refused": 0, "peers": [], "counted": {}}
# --count-only (the benches): each export decoded and its spans or records counted, none kept.
COUNT_ONLY = False


def any_value(value):
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


def attributes(pairs):
    return {pair.key: any_value(pair.value) for pair in pairs}


def span_json(span):
    return {
        "trace_id": span.trace_id.hex(),
        "span_id": span.span_id.hex(),
        "parent_span_id": span.parent_span_id.hex(),
        "name": span.name,
        "kind": trace_pb2.Span.SpanKind.Name(span.kind),
        "start": span.start_time_unix_nano,
        "end": span.end_time_unix_nano,
        "attributes": attributes(span.attributes),
        "links": [{"trace_id": l.trace_id.hex(), "span_id": l.span_id.hex()} for l in span.links],
        "status": {"code": trace_pb2.Status.StatusCode.Name(span.status.code), "message": span.status.message},
        "flags": span.flags,
    }


def record_json(record):
    return {
        "time": record.time_unix_nano,
        "severity": record.severity_number,
        "severity_text": record.severity_text,
        "body": any_value(record.body),
        "attributes": attributes(record.attributes),
        "trace_id": record.trace_id.hex(),
        "span_id": record.span_id.hex(),
    }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        if urlsplit(self.path).path == "/test/seen":
            with LOCK:
                return serving.send_json(self, 200, dict(STATE))
        serving.send_json(self, 404, {"error": "not found"})

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        split = urlsplit(self.path)
        if split.path == "/test/mode":
            query = parse_qs(split.query)
            with LOCK:
                STATE["delay"] = float(query.get("delay", ["0"])[0])
                STATE["status"] = int(query.get("status", ["200"])[0])
            return serving.send_json(self, 200, {"ok": True})
        if split.path not in ("/v1/traces", "/v1/logs"):
            return serving.send_json(self, 404, {"error": "not found"})
        with LOCK:
            delay, status = STATE["delay"], STATE["status"]
            STATE["exports"] += 1
            STATE["peers"].append(self.client_address[1])  # the exporter's port: one per connection
            STATE["headers"].append([[k, v] for k, v in self.headers.items()])
        if delay:
            time.sleep(delay)
        if status != 200:
            with LOCK:
                STATE["refused"] += 1
            return serving.send_json(self, status, {"error": "refused"})
        if COUNT_ONLY:
            # Decoded all the same (a batch that does not parse is a 400), counted, not kept.
            request = ExportTraceServiceRequest() if split.path == "/v1/traces" else ExportLogsServiceRequest()
            try:
                request.ParseFromString(body)
            except Exception:
                with LOCK:
                    STATE["refused"] += 1
                return serving.send_json(self, 400, {"error": "not an OTLP protobuf body"})
            items = request.resource_spans if split.path == "/v1/traces" else request.resource_logs
            n = sum(len(s.spans if split.path == "/v1/traces" else s.log_records)
                    for r in items for s in (r.scope_spans if split.path == "/v1/traces" else r.scope_logs))
            with LOCK:
                STATE["counted"][split.path] = STATE["counted"].get(split.path, 0) + n
        elif split.path == "/v1/traces":
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            with LOCK:
                for resource_spans in request.resource_spans:
                    STATE["resources"].append(attributes(resource_spans.resource.attributes))
                    for scope_spans in resource_spans.scope_spans:
                        STATE["spans"].extend(span_json(s) for s in scope_spans.spans)
        else:
            request = ExportLogsServiceRequest()
            request.ParseFromString(body)
            with LOCK:
                for resource_logs in request.resource_logs:
                    STATE["resources"].append(attributes(resource_logs.resource.attributes))
                    for scope_logs in resource_logs.scope_logs:
                        STATE["logs"].extend(record_json(r) for r in scope_logs.log_records)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--count-only", action="store_true")
    args = parser.parse_args()
    global COUNT_ONLY
    COUNT_ONLY = args.count_only
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    serving.serve_until_stopped(server)


if __name__ == "__main__":
    main()

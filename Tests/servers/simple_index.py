#!/usr/bin/env python3
"""A package index over HTTPS (PEP 503, "simple" repository API), stdlib only, for pip through
tokenproxy's forward-proxy tunnel in the end-to-end tests.

Run with `--port 0` (or 443 in a network namespace); it prints `READY <port>` on stdout once
listening. At start it writes one small, valid wheel (`--wheel NAME==VERSION`, a module of one
line) into `--folder` and serves:

  /simple/                  a link to each project
  /simple/<project>/        a link to each of its files, with `#sha256=` (pip checks it)
  /files/<file>             the file
"""
import argparse
import base64
import hashlib
import html
import os
import sys
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from serving import announce_and_serve, send, serve_tls

FILES = {}  # file name -> (project, bytes)


def make_wheel(folder, requirement):
    """A pure-Python wheel (PEP 427) for `name==version`, with its RECORD's hashes."""
    name, version = requirement.split("==")
    module = name.replace("-", "_")
    dist_info = "%s-%s.dist-info" % (module, version)
    members = {
        "%s/__init__.py" % module: b"VERSION = %r\n" % version.encode(),
        dist_info + "/METADATA": ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version)).encode(),
        dist_info + "/WHEEL": b"Wheel-Version: 1.0\nGenerator: simple_index.py\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, data in members.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (path, digest, len(data)))
    record.append(dist_info + "/RECORD,,")
    members[dist_info + "/RECORD"] = ("\n".join(record) + "\n").encode()
    file_name = "%s-%s-py3-none-any.whl" % (module, version)
    path = os.path.join(folder, file_name)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, data in members.items():
            archive.writestr(member, data)
    with open(path, "rb") as f:
        FILES[file_name] = (name.lower(), f.read())


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("simple_index: " + (fmt % args) + "\n")

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        projects = sorted({project for project, _ in FILES.values()})
        if path == "/simple/":
            links = "".join('<a href="/simple/%s/">%s</a>\n' % (p, html.escape(p)) for p in projects)
            send(self, 200, ("<!DOCTYPE html><html><body>\n%s</body></html>\n" % links).encode(), "text/html")
            return
        parts = [p for p in path.split("/") if p]
        if len(parts) == 2 and parts[0] == "simple" and parts[1] in projects:
            links = "".join(
                '<a href="/files/%s#sha256=%s">%s</a>\n' % (name, hashlib.sha256(data).hexdigest(), html.escape(name))
                for name, (project, data) in sorted(FILES.items()) if project == parts[1])
            send(self, 200, ("<!DOCTYPE html><html><body>\n%s</body></html>\n" % links).encode(), "text/html")
            return
        if len(parts) == 2 and parts[0] == "files" and parts[1] in FILES:
            send(self, 200, FILES[parts[1]][1], "application/octet-stream")
            return
        send(self, 404, b"not found\n", "text/plain")

    do_HEAD = do_GET


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--folder", required=True)
    parser.add_argument("--wheel", action="append", default=[], help="NAME==VERSION of a wheel to make and serve")
    parser.add_argument("--tls-cert", required=True)
    parser.add_argument("--tls-key", required=True)
    args = parser.parse_args()
    for requirement in args.wheel:
        make_wheel(args.folder, requirement)
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    serve_tls(server, args.tls_cert, args.tls_key)
    announce_and_serve(server)


if __name__ == "__main__":
    main()

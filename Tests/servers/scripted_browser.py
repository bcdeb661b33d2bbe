#!/usr/bin/env python3
"""A scripted browser for `login: browser` tests, run as `$BROWSER URL` (tokenproxy starts it with stdin,
stdout and stderr on /dev/null, so it is told what to do through the environment):

  SCRIPTED_BROWSER_USER, SCRIPTED_BROWSER_PASSWORD   what to type into Django's login form
  SCRIPTED_BROWSER_CONSENT    allow (default) | deny: the button pressed on the consent page
  SCRIPTED_BROWSER_FORGE      1: first send the loopback listener requests that must not end the login
                              (wrong state, no state, an error with a wrong state, another path, POST),
                              while one idle connection stays open the whole time
  SCRIPTED_BROWSER_FOLLOW     1 (default): follow the redirect to the loopback listener; 0: stop there
  SCRIPTED_BROWSER_REPLAY     1: after the login, send the same callback again
  SCRIPTED_BROWSER_LOG        a file: one JSON object per step ({"step", "status", "body"|"location"|"error"})

Standard library only. Cookies are kept; redirects are followed by hand so each hop can be seen.
"""
import http.client
import http.cookiejar
import json
import os
import re
import socket
import sys
import urllib.parse
import urllib.request


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


LOG_PATH = os.environ.get("SCRIPTED_BROWSER_LOG")


def log(**entry):
    if LOG_PATH:
        with open(LOG_PATH, "a") as f:
            f.write(json.dumps(entry) + "\n")


jar = http.cookiejar.CookieJar()
opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar), NoRedirect())


def request(url, data=None, method=None):
    """One request, no redirect followed: (status, headers, body text)."""
    body = urllib.parse.urlencode(data).encode() if data is not None else None
    req = urllib.request.Request(url, data=body, method=method)
    if body is not None:
        req.add_header("Content-Type", "application/x-www-form-urlencoded")
        req.add_header("Referer", url)
    try:
        with opener.open(req, timeout=30) as response:
            return response.status, response.headers, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read().decode("utf-8", "replace")


def hidden_fields(page):
    fields = {}
    for match in re.finditer(r"<input[^>]*>", page):
        tag = match.group(0)
        name = re.search(r'name="([^"]*)"', tag)
        value = re.search(r'value="([^"]*)"', tag)
        if name and 'type="hidden"' in tag:
            fields[name.group(1)] = (value.group(1) if value else "").replace("&amp;", "&").replace("&quot;", '"')
    return fields


def redirect_of(authorize_url):
    """The redirect URI the authorization request names: where the last hop goes."""
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(authorize_url).query)
    redirect = urllib.parse.urlsplit(query["redirect_uri"][0])
    return (redirect.hostname, redirect.port, redirect.path)


def raw_request(host, port, text):
    """Sends raw bytes to the listener; returns the status code or an error name."""
    try:
        with socket.create_connection((host, port), timeout=15) as s:
            s.sendall(text.encode())
            data = b""
            while b"\r\n" not in data:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
            return int(data.split(b" ")[1]) if data.startswith(b"HTTP/1.1 ") else "no answer"
    except OSError as error:
        return type(error).__name__


def forge(callback_url):
    parts = urllib.parse.urlsplit(callback_url)
    host, port, path = parts.hostname, parts.port, parts.path
    query = urllib.parse.parse_qs(parts.query)
    code = query["code"][0]
    for step, target, method in [
        ("wrong state", f"{path}?code={code}&state=forged", "GET"),
        ("no state", f"{path}?code={code}", "GET"),
        ("error with a wrong state", f"{path}?error=access_denied&state=forged", "GET"),
        ("other path", f"/favicon.ico?{parts.query}", "GET"),
        ("post", f"{path}?{parts.query}", "POST"),
    ]:
        status = raw_request(host, port, f"{method} {target} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Length: 0\r\n\r\n")
        log(step=step, status=status)


def main():
    url = sys.argv[1]
    consent = os.environ.get("SCRIPTED_BROWSER_CONSENT", "allow")
    follow = os.environ.get("SCRIPTED_BROWSER_FOLLOW", "1") == "1"
    idle = None
    callback = redirect_of(url)
    for hop in range(12):
        hop_parts = urllib.parse.urlsplit(url)
        if (hop_parts.hostname, hop_parts.port, hop_parts.path) == callback:
            parts = urllib.parse.urlsplit(url)
            if os.environ.get("SCRIPTED_BROWSER_FORGE") == "1":
                # A browser's preconnect: open, idle, blocking nothing.
                idle = socket.create_connection((parts.hostname, parts.port), timeout=15)
                forge(url)
            if not follow:
                log(step="redirect", location=url)
                return
            connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
            connection.request("GET", parts.path + "?" + parts.query)
            response = connection.getresponse()
            headers = {k.lower(): v for k, v in response.getheaders()}
            log(step="callback", status=response.status, body=response.read().decode("utf-8", "replace"), headers=headers)
            connection.close()
            if idle:
                idle.close()
            if os.environ.get("SCRIPTED_BROWSER_REPLAY") == "1":
                status = raw_request(parts.hostname, parts.port, f"GET {parts.path}?{parts.query} HTTP/1.1\r\nHost: x\r\n\r\n")
                log(step="replay", status=status)
            return
        status, headers, page = request(url)
        if status in (301, 302, 303, 307):
            url = urllib.parse.urljoin(url, headers["Location"])
            continue
        if status != 200:
            log(step="page", status=status, body=page[:500])
            return
        fields = hidden_fields(page)
        if 'name="password"' in page:
            fields.update(username=os.environ["SCRIPTED_BROWSER_USER"], password=os.environ["SCRIPTED_BROWSER_PASSWORD"])
            status, headers, page = request(url, fields)
        elif 'name="allow"' in page:
            if consent == "allow":
                fields["allow"] = "Authorize"
            status, headers, page = request(url, fields)
        else:
            log(step="page", status=status, body=page[:500])
            return
        if status in (301, 302, 303):
            url = urllib.parse.urljoin(url, headers["Location"])
            continue
        log(step="form", status=status, body=page[:500])
        return
    log(step="too many redirects")


if __name__ == "__main__":
    main()

"""django-oauth-toolkit as a real authorization server for `login: browser` tests: Django's own login
form, the consent page, the authorization-code grant with PKCE required (S256 only) and OpenID Connect
(an ID token naming the person by `preferred_username`).

  /accounts/login/        Django's LoginView (user `ann`, password from --password)
  /o/authorize/ /o/token/ django-oauth-toolkit; discovery at /o/.well-known/openid-configuration
  GET /test/stats         {"grants": {"authorization_code": {"200": n, "400": m}, ...},
                           "exchanges": [{"has_verifier": bool, "redirect_uri": ..., "scope_sent": bool}]}

One public client `tokenproxy` (no secret) with the loopback redirects http://127.0.0.1/callback and
http://[::1]/callback (any port, RFC 8252 §7.3) and http://localhost:<--localhost-port>/callback.
--no-refresh-token drops refresh_token from token answers (a provider that gives none).
Prints `READY <port>` once it listens. The database is a SQLite file in a fresh temporary folder.
"""
import argparse
import json
import os
import shutil
import socketserver
import sys
import tempfile
import threading
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import django
from django.conf import settings
from django.http import HttpResponse
from django.urls import include, path

LOCK = threading.Lock()
STATS = {"grants": {}, "exchanges": []}
OPTIONS = {"no_refresh_token": False}

LOGIN_TEMPLATE = """<!DOCTYPE html><html><body>
<form method="post" action="{{ request.path }}">{% csrf_token %}
{{ form.as_p }}
<input type="hidden" name="next" value="{{ next }}">
<button type="submit">Sign in</button></form></body></html>"""


def stats(request):
    with LOCK:
        return HttpResponse(json.dumps(STATS), content_type="application/json")


urlpatterns = []


class CountingTokenEndpoint:
    """Counts token requests by grant type and status, and notes what each code exchange carried."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path != "/o/token/" or request.method != "POST":
            return self.get_response(request)
        form = parse_qs(request.body.decode("utf-8", "replace"))
        grant = form.get("grant_type", ["?"])[0]
        response = self.get_response(request)
        with LOCK:
            by_status = STATS["grants"].setdefault(grant, {})
            by_status[str(response.status_code)] = by_status.get(str(response.status_code), 0) + 1
            if grant == "authorization_code":
                STATS["exchanges"].append(
                    {
                        "has_verifier": "code_verifier" in form,
                        "redirect_uri": form.get("redirect_uri", [None])[0],
                        "scope_sent": "scope" in form,
                    }
                )
        if OPTIONS["no_refresh_token"] and response.status_code == 200:
            answer = json.loads(response.content)
            answer.pop("refresh_token", None)
            response.content = json.dumps(answer).encode()
            response["Content-Length"] = str(len(response.content))
        return response


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):
        pass


class ThreadingWSGIServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--password", default="ann-password-1")
    parser.add_argument("--skip-authorization", action="store_true")
    parser.add_argument("--no-refresh-token", action="store_true")
    parser.add_argument("--localhost-port", type=int, default=0)
    args = parser.parse_args()
    OPTIONS["no_refresh_token"] = args.no_refresh_token

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    folder = tempfile.mkdtemp(prefix="dot-server-")
    settings.configure(
        DEBUG=False,
        SECRET_KEY="test-only-dot-server",
        ALLOWED_HOSTS=["*"],
        ROOT_URLCONF=__name__,
        INSTALLED_APPS=[
            "django.contrib.auth",
            "django.contrib.contenttypes",
            "django.contrib.sessions",
            "oauth2_provider",
        ],
        MIDDLEWARE=[
            __name__ + ".CountingTokenEndpoint",
            "django.contrib.sessions.middleware.SessionMiddleware",
            "django.middleware.csrf.CsrfViewMiddleware",
            "django.contrib.auth.middleware.AuthenticationMiddleware",
        ],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.path.join(folder, "db.sqlite3")}},
        TEMPLATES=[
            {
                "BACKEND": "django.template.backends.django.DjangoTemplates",
                "OPTIONS": {
                    "loaders": [
                        ("django.template.loaders.locmem.Loader", {"registration/login.html": LOGIN_TEMPLATE}),
                        "django.template.loaders.app_directories.Loader",
                    ],
                    "context_processors": [
                        "django.template.context_processors.request",
                        "django.contrib.auth.context_processors.auth",
                    ],
                },
            }
        ],
        LOGIN_URL="/accounts/login/",
        USE_TZ=True,
        PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"],  # fast; a test server only
        DEFAULT_AUTO_FIELD="django.db.models.AutoField",
        OAUTH2_PROVIDER={
            "PKCE_REQUIRED": True,
            "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
            # The authorization response carries `iss` too (RFC 9207): an extra parameter to ignore.
            "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
            "OIDC_ENABLED": True,
            "OIDC_RSA_PRIVATE_KEY": pem,
            "OAUTH2_VALIDATOR_CLASS": __name__ + ".Validator",
            "SCOPES": {"openid": "OpenID Connect", "read": "Reading scope"},
            "ACCESS_TOKEN_EXPIRE_SECONDS": 3600,
        },
    )
    django.setup()

    from django.contrib.auth.models import User
    from django.contrib.auth.views import LoginView
    from django.core.management import call_command
    from oauth2_provider.models import Application
    from oauth2_provider.oauth2_validators import OAuth2Validator

    class Validator(OAuth2Validator):
        oidc_claim_scope = None  # every claim in every ID token, whatever the scope

        def get_additional_claims(self, request):
            return {"preferred_username": request.user.username}

    sys.modules[__name__].Validator = Validator
    urlpatterns.extend(
        [
            path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
            path("accounts/login/", LoginView.as_view()),
            path("test/stats", stats),
        ]
    )
    call_command("migrate", verbosity=0)
    User.objects.create_user("ann", "ann@example.com", args.password)
    redirects = ["http://127.0.0.1/callback", "http://[::1]/callback"]
    if args.localhost_port:
        redirects.append(f"http://localhost:{args.localhost_port}/callback")
    Application.objects.create(
        client_id="tokenproxy",
        name="tokenproxy",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=" ".join(redirects),
        skip_authorization=args.skip_authorization,
        algorithm=Application.RS256_ALGORITHM,
    )

    from django.core.wsgi import get_wsgi_application

    server = make_server("127.0.0.1", args.port, get_wsgi_application(), server_class=ThreadingWSGIServer, handler_class=QuietHandler)
    print(f"READY {server.server_port}", flush=True)
    try:
        server.serve_forever()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

"""What Authlib asks of a client and of an issued token (RFC 6749 §2, §5.1), for the test identity
providers built on it."""
import time

from authlib.oauth2.rfc6749.models import ClientMixin, TokenMixin


class RegisteredClient(ClientMixin):
    """A client known by its id, with no redirect URIs (no authorization-code flow): every grant
    type is allowed, no response type. Subclasses say how it authenticates."""

    def __init__(self, client_id):
        self.client_id = client_id

    def get_client_id(self):
        return self.client_id

    def get_default_redirect_uri(self):
        return None

    def get_allowed_scope(self, scope):
        return scope or ""

    def check_redirect_uri(self, redirect_uri):
        return False

    def check_response_type(self, response_type):
        return False

    def check_grant_type(self, grant_type):
        return True


class IssuedToken(TokenMixin):
    """An access token and, maybe, a refresh token issued to `client_id` for `user`, valid for
    `expires_in` seconds from now; `clients` is the server's table of clients by id."""

    def __init__(self, data, client_id, user, expires_in, clients):
        self.access_token = data["access_token"]
        self.refresh_token = data.get("refresh_token")
        self.client_id = client_id
        self.user = user
        self.issued_at = time.time()
        self.expires_in = expires_in
        self.clients = clients

    def check_client(self, client):
        return client.get_client_id() == self.client_id

    def get_expires_in(self):
        return self.expires_in

    def is_expired(self):
        return time.time() >= self.issued_at + self.expires_in

    def get_user(self):
        return self.user

    def get_client(self):
        return self.clients.get(self.client_id)

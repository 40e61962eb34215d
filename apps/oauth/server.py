"""The OAuth server django-oauth-toolkit runs (OAUTH2_SERVER_CLASS): oauthlib's, with only the grants an MCP
host uses, whatever an application row says (its grant type is editable in DOT's admin, and was through
RFC 7592): the password grant would make the token endpoint a staff-password oracle, client_credentials
would issue tokens with no person behind them and no PKCE, implicit a token in a URL."""

from oauthlib.oauth2 import Server
from oauthlib.oauth2.rfc6749.endpoints import AuthorizationEndpoint, TokenEndpoint

HONOURED_GRANT_TYPES = ("authorization_code", "refresh_token")


class AuthorizationCodeServer(Server):
    def __init__(self, request_validator, *args, **kwargs):
        super().__init__(request_validator, *args, **kwargs)
        AuthorizationEndpoint.__init__(
            self, default_response_type="code", response_types={"code": self.auth_grant}, default_token_type=self.bearer
        )
        TokenEndpoint.__init__(
            self,
            default_grant_type="authorization_code",
            grant_types={"authorization_code": self.auth_grant, "refresh_token": self.refresh_grant},
            default_token_type=self.bearer,
        )

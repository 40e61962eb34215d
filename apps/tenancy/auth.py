"""API-key authentication: `Authorization: Api-Key <key>` or `X-API-Key: <key>`."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication

from apps.tenancy.selectors import client_for_api_key


def raw_key_from_headers(*, authorization: str, x_api_key: str) -> str | None:
    """The key a request carries, or None; a malformed Authorization header is refused."""
    if authorization:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() == "api-key" and value.strip():
            return value.strip()
        raise exceptions.AuthenticationFailed("Authorization header must be 'Api-Key <key>'.")
    return x_api_key.strip() or None


def client_for_raw_key(raw_key: str):
    """(client, api_key) of an active client, else AuthenticationFailed; for REST and MCP alike."""
    found = client_for_api_key(raw_key=raw_key)
    if found is None:
        raise exceptions.AuthenticationFailed("Invalid or revoked API key.")
    client, api_key = found
    if not client.is_active:
        raise exceptions.AuthenticationFailed("This client is disabled.")
    return client, api_key


class APIKeyAuthentication(BaseAuthentication):
    """Resolves the calling client; request.user is the Client, request.auth its ClientAPIKey."""

    def authenticate(self, request):
        raw_key = raw_key_from_headers(
            authorization=request.META.get("HTTP_AUTHORIZATION", ""), x_api_key=request.META.get("HTTP_X_API_KEY", "")
        )
        return None if raw_key is None else client_for_raw_key(raw_key)

    def authenticate_header(self, request):
        return "Api-Key"


class APIKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    """Documents the API key header in the OpenAPI schema (Swagger's Authorize button)."""

    target_class = "apps.tenancy.auth.APIKeyAuthentication"
    name = "ApiKeyAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Api-Key <key>` (or send the key alone in `X-API-Key`).",
        }

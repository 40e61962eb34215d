"""The authorization server's endpoints, in django-oauth-toolkit's namespace (its views reverse
their siblings there): RFC 8414 metadata at the root, the rest under /oauth/."""

from django.urls import path
from oauth2_provider import views as dot

from apps.oauth.views import AuthorizeView, RegistrationManagementView, RegistrationView, TokenView

app_name = "oauth2_provider"

urlpatterns = [
    path(".well-known/oauth-authorization-server", dot.OAuthServerMetadataView.as_view(), name="oauth-server-metadata"),
    path("oauth/authorize/", AuthorizeView.as_view(), name="authorize"),
    path("oauth/token/", TokenView.as_view(), name="token"),
    path("oauth/revoke/", dot.RevokeTokenView.as_view(), name="revoke-token"),
    path("oauth/register/", RegistrationView.as_view(), name="dcr-register"),
    path(
        "oauth/register/<str:client_id>/",
        RegistrationManagementView.as_view(),
        name="dcr-register-management",
    ),
]

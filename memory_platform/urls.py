from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from apps.core.throttling import limited_by_address
from apps.core.views import RedocDocsView, SwaggerDocsView
from memory_platform.health import healthz, readyz

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SwaggerDocsView.as_view(url_name="schema"), name="docs"),
    path("api/redoc/", RedocDocsView.as_view(url_name="schema"), name="redoc"),
    path("api/v1/", include("memory_platform.api_router")),
    # Login attempts per address, before the admin's own route to the same view (its lockout per username stays).
    path(
        "admin/login/",
        limited_by_address(bucket="admin-login", setting="CREDENTIAL_REQUESTS_PER_MINUTE")(admin.site.login),
    ),
    path("admin/", admin.site.urls),
    # The OAuth 2.1 authorization server for /mcp (apps.oauth): /.well-known/oauth-authorization-server, /oauth/…
    path("", include("apps.oauth.urls")),
]

"""The API docs pages, served from the platform's own static files."""

from drf_spectacular.views import SpectacularRedocView, SpectacularSwaggerView

# The docs pages load only the platform's own files (drf-spectacular-sidecar); the policy also stops
# the browser from fetching what the bundles would reach for elsewhere (ReDoc's hosted logo).
DOCS_CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; worker-src 'self' blob:; connect-src 'self'"
)


class _SelfContainedDocs:
    schema = None  # HTML pages, not API operations: left out of the OpenAPI schema

    def get(self, request, *args, **kwargs):
        response = super().get(request, *args, **kwargs)
        response["Content-Security-Policy"] = DOCS_CONTENT_SECURITY_POLICY
        return response


class SwaggerDocsView(_SelfContainedDocs, SpectacularSwaggerView):
    pass


class RedocDocsView(_SelfContainedDocs, SpectacularRedocView):
    pass

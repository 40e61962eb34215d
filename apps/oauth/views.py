"""The authorization server's own pages on django-oauth-toolkit: the authorize page, where staff bind
an application to a platform client; client registration and its management limited to what an MCP host
needs; the token endpoint, rate limited per address like registration."""

import ipaddress
import json
from urllib.parse import urlsplit

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import HttpResponse, HttpResponseForbidden, JsonResponse
from django.urls import reverse_lazy
from django.utils.decorators import method_decorator
from oauth2_provider import views as dot
from oauth2_provider.exceptions import OAuthToolkitError
from oauth2_provider.forms import AllowForm
from oauth2_provider.models import Application
from oauth2_provider.views import AuthorizationView
from oauth2_provider.views.dynamic_client_registration import (
    DynamicClientRegistrationManagementView,
    DynamicClientRegistrationView,
)
from oauthlib.oauth2 import AccessDeniedError

from apps.core.throttling import limited_by_address
from apps.oauth.selectors import clients_for_approver
from apps.oauth.server import HONOURED_GRANT_TYPES
from apps.oauth.services import application_bind

# RFC 7591 metadata an MCP host may ask for: the authorization-code grant (with refresh) and nothing else.
REGISTRABLE_RESPONSE_TYPES = {"code"}
LOOPBACK_HOSTS = {"localhost"}


class ApproveForm(AllowForm):
    platform_client = forms.ModelChoiceField(
        queryset=None, required=False, label="Act as client", empty_label="Choose a client"
    )

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("allow") and not cleaned.get("platform_client"):
            self.add_error("platform_client", "Choose the client this application acts as.")
        return cleaned


class _ApprovalNeeded(Exception):
    """A shortcut (DOT's `skip_authorization`) for an application nobody bound yet: the page is shown instead."""


class AuthorizeView(AuthorizationView):
    """Staff only; the clients offered are the approver's (clients_for_approver), or the bound one.

    DOT issues a code without the form on two shortcuts: an application's `skip_authorization`, and
    `approval_prompt=auto` with an earlier token. The organisation check is therefore made where every
    code is issued (`create_authorization_response`), and before anything on the page: an application
    bound to a client the staff member may not approve for is refused. `approval_prompt` from the URL
    is ignored (the setting, `force`, holds)."""

    template_name = "oauth/authorize.html"
    form_class = ApproveForm
    login_url = reverse_lazy("admin:login")

    def dispatch(self, request, *args, **kwargs):
        if request.user.is_authenticated and not request.user.is_staff:
            return HttpResponseForbidden("Only staff members may approve OAuth applications.")
        return super().dispatch(request, *args, **kwargs)

    def get(self, request, *args, **kwargs):
        query = request.GET.copy()
        query.pop("approval_prompt", None)
        request.GET = query
        application = self._application(request.GET.get("client_id"))
        if application is not None and not self._approvable(application, unbound=True):
            return HttpResponseForbidden("This OAuth application acts as a client you may not approve for.")
        try:
            return super().get(request, *args, **kwargs)
        except _ApprovalNeeded:
            return self.render_to_response(self.get_context_data(**self.oauth2_data))

    def create_authorization_response(self, request, scopes, credentials, allow):
        """Every code DOT issues passes here, after the form or on a shortcut."""
        if allow:
            application = self._application(credentials.get("client_id"))
            if getattr(application, "platform_binding", None) is None:
                raise _ApprovalNeeded
            if not self._approvable(application, unbound=False):
                raise OAuthToolkitError(
                    error=AccessDeniedError(state=credentials.get("state")), redirect_uri=credentials["redirect_uri"]
                )
        return super().create_authorization_response(request, scopes, credentials, allow)

    def _approvable(self, application: Application, *, unbound: bool) -> bool:
        """Bound to a client of the staff member's organisation (any, for a superuser); `unbound` if not bound."""
        binding = getattr(application, "platform_binding", None)
        if binding is None:
            return unbound
        return clients_for_approver(user=self.request.user).filter(pk=binding.client_id).exists()

    def _application(self, client_id=None) -> Application | None:
        client_id = client_id or self.request.POST.get("client_id") or getattr(self, "oauth2_data", {}).get("client_id")
        return (
            Application.objects.select_related("platform_binding__client").filter(client_id=client_id).first()
            if client_id
            else None
        )

    def get_form(self, form_class=None):
        form = super().get_form(form_class)
        clients = clients_for_approver(user=self.request.user)
        application = self._application()
        binding = getattr(application, "platform_binding", None) if application else None
        if binding is not None:
            clients = clients.filter(pk=binding.client_id)
            form.fields["platform_client"].initial = binding.client_id
        form.fields["platform_client"].queryset = clients
        self.binding = binding
        return form

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["binding"] = getattr(self, "binding", None)
        return context

    def form_valid(self, form):
        application = self._application()
        if application is None:  # a tampered hidden field
            form.add_error(None, "No OAuth application has this client_id.")
            return self.form_invalid(form)
        if not form.cleaned_data.get("allow"):
            return super().form_valid(form)
        with transaction.atomic():
            try:
                application_bind(
                    application=application, client=form.cleaned_data["platform_client"], user=self.request.user
                )
            except ValidationError as exc:
                form.add_error("platform_client", exc.messages[0])
                return self.form_invalid(form)
            return super().form_valid(form)


def _error(error: str, description: str) -> JsonResponse:
    return JsonResponse({"error": error, "error_description": description}, status=400)


def _redirect_uri_problem(uri) -> str | None:
    if not isinstance(uri, str) or not uri:
        return "Each redirect_uri must be a non-empty string."
    parts = urlsplit(uri)
    if parts.scheme not in ("https", "http"):
        return f"{uri!r}: the scheme must be https (or http on a loopback address)."
    if parts.fragment or not parts.hostname:
        return f"{uri!r} must be an absolute URI without a fragment."
    if parts.scheme == "http":
        try:
            loopback = ipaddress.ip_address(parts.hostname).is_loopback
        except ValueError:
            loopback = parts.hostname in LOOPBACK_HOSTS
        if not loopback:
            return f"{uri!r}: http redirect URIs must be loopback (127.0.0.1, [::1], localhost)."
    return None


def _metadata_problem(body: bytes) -> JsonResponse | None:
    """What registration refuses, and so its management (RFC 7592 `PUT`) too: one body for both."""
    try:
        metadata = json.loads(body)
    except ValueError:
        metadata = None
    if not isinstance(metadata, dict):
        return _error("invalid_client_metadata", "The body must be a JSON object.")
    grant_types = metadata.get("grant_types", ["authorization_code"])
    if not isinstance(grant_types, list) or not set(grant_types) <= set(HONOURED_GRANT_TYPES):
        return _error("invalid_client_metadata", "grant_types may only be authorization_code and refresh_token.")
    if "authorization_code" not in grant_types:
        return _error("invalid_client_metadata", "grant_types must include authorization_code.")
    response_types = metadata.get("response_types", ["code"])
    if not isinstance(response_types, list) or not set(response_types) <= REGISTRABLE_RESPONSE_TYPES:
        return _error("invalid_client_metadata", "response_types may only be code.")
    redirect_uris = metadata.get("redirect_uris")
    if not isinstance(redirect_uris, list) or not redirect_uris:
        return _error("invalid_redirect_uri", "redirect_uris must be a non-empty array of URIs.")
    if len(redirect_uris) > settings.OAUTH_REGISTRATION_MAX_REDIRECT_URIS:
        return _error(
            "invalid_redirect_uri",
            f"redirect_uris may name at most {settings.OAUTH_REGISTRATION_MAX_REDIRECT_URIS} URIs "
            "(OAUTH_REGISTRATION_MAX_REDIRECT_URIS).",
        )
    for uri in redirect_uris:
        if problem := _redirect_uri_problem(uri):
            return _error("invalid_redirect_uri", problem)
    client_name = metadata.get("client_name", "")
    if not isinstance(client_name, str) or len(client_name) > 255:
        return _error("invalid_client_metadata", "client_name must be a string of at most 255 characters.")
    return None


@method_decorator(
    limited_by_address(bucket="oauth-register", setting="OAUTH_REGISTRATIONS_PER_MINUTE", json=True), name="post"
)
class RegistrationView(DynamicClientRegistrationView):
    """RFC 7591 registration, open to anyone (it grants nothing until staff approve it), for the
    authorization-code grant and https or loopback redirect URIs only, a few a minute per address."""

    def post(self, request, *args, **kwargs):
        return _metadata_problem(request.body) or super().post(request, *args, **kwargs)


class RegistrationManagementView(DynamicClientRegistrationManagementView):
    """RFC 7592: a registration changed with its (expiring) registration token keeps registration's rules."""

    def put(self, request, *args, **kwargs):
        authenticated = self._authenticate_registration_request(request, kwargs.get("client_id", ""))
        if isinstance(authenticated, HttpResponse):
            return authenticated  # a caller without the token learns nothing about what it sent
        return _metadata_problem(request.body) or super().put(request, *args, **kwargs)


@method_decorator(
    limited_by_address(bucket="oauth-token", setting="CREDENTIAL_REQUESTS_PER_MINUTE", json=True), name="post"
)
class TokenView(dot.TokenView):
    """The token endpoint, a few requests a minute per address (codes, refresh tokens and secrets are guessed here)."""

"""Writes for OAuth: binding an application to the platform client its tokens act as, and revoking
a client's tokens."""

from django.core.exceptions import ValidationError
from django.db import transaction
from oauth2_provider.models import AccessToken, Application, Grant, RefreshToken, clear_expired

from apps.oauth.models import ApplicationBinding
from apps.tenancy.models import Client


@transaction.atomic
def application_bind(*, application: Application, client: Client, user=None) -> ApplicationBinding:
    """Again to the same client is a no-op; to another is refused: its tokens would change tenant."""
    binding, created = ApplicationBinding.objects.select_for_update().get_or_create(
        application=application, defaults={"client": client, "bound_by": user}
    )
    if not created and binding.client_id != client.pk:
        raise ValidationError(
            f"OAuth application {application.name or application.client_id!r} acts as another client."
        )
    return binding


@transaction.atomic
def client_oauth_revoke(*, client: Client) -> int:
    """Its OAuth hosts must be approved again. Returns how many applications it unbound."""
    applications = Application.objects.filter(platform_binding__client=client)
    for model in (RefreshToken, AccessToken, Grant):
        model.objects.filter(application__in=applications).delete()
    count, _ = ApplicationBinding.objects.filter(client=client).delete()
    return count


def tokens_clear_expired() -> None:
    """django-oauth-toolkit's `cleartokens`."""
    clear_expired()

"""What the management commands share: finding the organisation an `--org` option names."""

from django.core.management.base import CommandError

from apps.tenancy.models import Organization


def organization_named(name: str) -> Organization:
    organization = Organization.objects.filter(name=name).first()
    if organization is None:
        raise CommandError(f"No organisation named {name!r}.")
    return organization

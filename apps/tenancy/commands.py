"""What the management commands share: finding the organisation an `--org` option names, refusing invalid input."""

from contextlib import contextmanager

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from apps.tenancy.models import Organization


def add_owner_arguments(
    parser, *, scope: str = "Only this scope.", user: str = "Only this end user (their user_id)."
) -> None:
    """--org (required), --scope and --user: whose rows the command works on; `scope` and `user` are
    their help."""
    parser.add_argument("--org", required=True, help="Organisation name.")
    parser.add_argument("--scope", help=scope)
    parser.add_argument("--user", help=user)


def organization_named(name: str) -> Organization:
    organization = Organization.objects.filter(name=name).first()
    if organization is None:
        raise CommandError(f"No organisation named {name!r}.")
    return organization


@contextmanager
def refuse_invalid():
    """A ValidationError ends the command with its messages."""
    try:
        yield
    except ValidationError as exc:
        raise CommandError("; ".join(exc.messages)) from None

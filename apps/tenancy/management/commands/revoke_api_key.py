from django.core.management.base import BaseCommand

from apps.core.progress import wrote_json
from apps.tenancy.commands import refuse_invalid
from apps.tenancy.services import api_key_revoke


class Command(BaseCommand):
    help = "Revoke an API key by its prefix (the 8 characters after 'mp_')."

    def add_arguments(self, parser):
        parser.add_argument("prefix")
        parser.add_argument("--json", action="store_true", help="Print machine-readable JSON.")

    def handle(self, *args, prefix, **options):
        with refuse_invalid():
            api_key = api_key_revoke(prefix=prefix)
        revoked = {
            "prefix": api_key.prefix,
            "client": str(api_key.client_id),
            "revoked_at": api_key.revoked_at.isoformat(),
        }
        if not wrote_json(self, options, revoked):
            self.stdout.write(self.style.SUCCESS(f"Revoked API key {api_key.prefix} of client {api_key.client.name}"))

from django.core.management.base import BaseCommand

from apps.core.progress import wrote_json
from apps.tenancy.commands import organization_named, refuse_invalid
from apps.tenancy.services import client_create

PERMISSIONS = ("can_erase", "can_export", "can_manage_webhooks")


class Command(BaseCommand):
    help = "Create an API client in an organisation and print its API key (shown once)."

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True, help="Organisation name.")
        parser.add_argument("--name", required=True, help="Client name, unique in the organisation.")
        parser.add_argument("--write-scope", default=None, help="Scope stamped on writes; omit for a read-only client.")
        parser.add_argument(
            "--read-scopes", default=None, help="Comma-separated scopes it may read (default: its write scope)."
        )
        parser.add_argument(
            "--can-erase",
            action="store_true",
            help="Allow it to erase any end user or client of the organisation (off by default).",
        )
        parser.add_argument(
            "--can-export",
            action="store_true",
            help="Allow it to export any end user's, client's or scope's data of the organisation (off by default).",
        )
        parser.add_argument(
            "--can-manage-webhooks",
            action="store_true",
            help="Allow it to manage the organisation's webhook endpoints, which see events of every scope "
            "(off by default).",
        )
        parser.add_argument("--json", action="store_true", help="Print machine-readable JSON.")

    def handle(self, *args, **options):
        organization = organization_named(options["org"])
        scopes = options["read_scopes"]
        read_scopes = None if scopes is None else [scope.strip() for scope in scopes.split(",") if scope.strip()]
        with refuse_invalid():
            client, raw_key = client_create(
                organization=organization,
                name=options["name"],
                write_scope=options["write_scope"],
                read_scopes=read_scopes,
                **{permission: options[permission] for permission in PERMISSIONS},
            )
        shown = ("name", "write_scope", "read_scopes", *PERMISSIONS)
        created = {"id": str(client.id), "organization": organization.name}
        created |= {name: getattr(client, name) for name in shown} | {"api_key": raw_key}
        if wrote_json(self, options, created):
            return
        self.stdout.write(self.style.SUCCESS(f"Created client {client.name} ({client.id}) in {organization.name}"))
        granted = (f"{name.replace('_', ' ')}: {'yes' if getattr(client, name) else 'no'}" for name in PERMISSIONS)
        scopes = f"write scope: {client.write_scope or '(read-only)'}; read scopes: {client.read_scopes}"
        self.stdout.write("; ".join([scopes, *granted]))
        self.stdout.write(f"API key (shown once, store it now): {raw_key}")

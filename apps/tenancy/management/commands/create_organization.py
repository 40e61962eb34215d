import json

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from apps.tenancy.services import organization_create


class Command(BaseCommand):
    help = "Create an organisation (a tenant)."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--json", action="store_true", help="Print machine-readable JSON.")

    def handle(self, *args, name, **options):
        try:
            organization = organization_create(name=name)
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from None
        if options["json"]:
            self.stdout.write(json.dumps({"id": str(organization.id), "name": organization.name}))
        else:
            self.stdout.write(self.style.SUCCESS(f"Created organisation {organization.name} ({organization.id})"))

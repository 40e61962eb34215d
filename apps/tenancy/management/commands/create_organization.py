from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from apps.core.progress import wrote_json
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
        if not wrote_json(self, options, {"id": str(organization.id), "name": organization.name}):
            self.stdout.write(self.style.SUCCESS(f"Created organisation {organization.name} ({organization.id})"))

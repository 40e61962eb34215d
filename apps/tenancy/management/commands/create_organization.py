from django.core.management.base import BaseCommand

from apps.core.progress import wrote_json
from apps.tenancy.commands import refuse_invalid
from apps.tenancy.services import organization_create


class Command(BaseCommand):
    help = "Create an organisation (a tenant)."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--json", action="store_true", help="Print machine-readable JSON.")

    def handle(self, *args, name, **options):
        with refuse_invalid():
            organization = organization_create(name=name)
        if not wrote_json(self, options, {"id": str(organization.id), "name": organization.name}):
            self.stdout.write(self.style.SUCCESS(f"Created organisation {organization.name} ({organization.id})"))

"""Create or update the platform's beat schedules (idempotent: upserts by name)."""

from django.core.management.base import BaseCommand

from apps.core.progress import wrote_json
from apps.core.schedules import schedules_upsert


class Command(BaseCommand):
    help = "Create or update the periodic tasks that beat runs (editable afterwards in the admin)."

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **options):
        names = schedules_upsert()
        if not wrote_json(self, options, {"schedules": names}) and options["verbosity"]:
            self.stdout.write(self.style.SUCCESS(f"Schedules up to date: {', '.join(names) or '(none)'}"))

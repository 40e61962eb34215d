from pathlib import Path

from django.core.management.base import BaseCommand

from apps.core.progress import wrote_json
from apps.portability.services.skill_files import skills_export_files
from apps.tenancy.commands import organization_named, refuse_invalid
from apps.tenancy.services import validate_scope


class Command(BaseCommand):
    help = "Write a scope's active shared skills as a folder of <name>/SKILL.md files (front matter + instructions)."

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True, help="Organisation name.")
        parser.add_argument("--scope", required=True, help="The scope whose skills to write.")
        parser.add_argument("--out", required=True, help="Folder to write into (created if missing).")
        parser.add_argument("--json", action="store_true", help="Print machine-readable JSON.")

    def handle(self, *args, **options):
        organization = organization_named(options["org"])
        with refuse_invalid():
            scope = validate_scope(options["scope"])
        written = skills_export_files(organization=organization, scope=scope, directory=Path(options["out"]))
        if wrote_json(self, options, {"files": [str(path) for path in written]}):
            return
        self.stdout.write(self.style.SUCCESS(f"Wrote {len(written)} skill file(s) under {options['out']}."))

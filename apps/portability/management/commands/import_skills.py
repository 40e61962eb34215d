from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from apps.core.progress import wrote_json
from apps.portability.archive import ArchiveError
from apps.portability.services.skill_files import skills_import_files
from apps.tenancy.commands import organization_named, refuse_invalid
from apps.tenancy.services import validate_scope


class Command(BaseCommand):
    help = (
        "Read a folder of SKILL.md files into a scope as reviewed (active, shared) skills: new names are created, "
        "changed ones get a new version, all or nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument("path", help="Folder holding <name>/SKILL.md files.")
        parser.add_argument("--org", required=True, help="Organisation name.")
        parser.add_argument("--scope", required=True, help="The scope the skills go into.")
        parser.add_argument("--json", action="store_true", help="Print machine-readable JSON.")

    def handle(self, *args, path, **options):
        organization = organization_named(options["org"])
        if not Path(path).is_dir():
            raise CommandError(f"{path!r} is not a folder.")
        with refuse_invalid():
            try:
                scope = validate_scope(options["scope"])
                counts = skills_import_files(organization=organization, scope=scope, directory=Path(path))
            except ArchiveError as exc:
                raise CommandError(f"Refused, nothing was stored: {exc}") from None
        if wrote_json(self, options, counts):
            return
        self.stdout.write(self.style.SUCCESS(f"Skills: {counts}."))

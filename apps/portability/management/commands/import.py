from django.core.management.base import BaseCommand, CommandError

from apps.core.progress import show_progress, wrote_json
from apps.portability.archive import ArchiveError
from apps.portability.services.importer import archive_import
from apps.tenancy.commands import organization_named


class Command(BaseCommand):
    help = (
        "Import an archive written by `export` into an organisation: every row validated, ids remapped, all or "
        "nothing; importing the same archive again changes nothing. Skills arrive pending review and unshared, "
        "lessons screened again and unapproved, unless --trust."
    )

    def add_arguments(self, parser):
        parser.add_argument("path", help="The archive file.")
        parser.add_argument("--org", required=True, help="Organisation to import into (it must exist).")
        parser.add_argument(
            "--trust",
            action="store_true",
            help="Keep the archive's skill reviews and sharing and its lessons' approvals: only for an archive you "
            "vouch for (your own backup). Without it, skills wait for review and lessons are screened again.",
        )
        parser.add_argument("--json", action="store_true", help="Print the result as JSON, no progress bar.")

    def handle(self, *args, path, **options):
        organization = organization_named(options["org"])
        try:
            result = archive_import(
                path=path,
                organization=organization,
                trust=options["trust"],
                on_progress=None if options["json"] else show_progress,
            )
        except ArchiveError as exc:
            raise CommandError(f"Archive refused, nothing was stored: {exc}") from None
        if wrote_json(self, options, result):
            return
        rows = {name: count for name, count in result["rows"].items() if count}
        self.stdout.write(
            self.style.SUCCESS(
                f"Imported {sum(rows.values())} rows into {organization.name} ({rows}); "
                f"vectors recomputed: {result['vectors_recomputed']}; turns cut to MESSAGE_MAX_CHARS: "
                f"{result['turns_cut']}."
            )
        )
        if not result["trusted"]:
            self.stdout.write(
                f"Not trusted (no --trust): {result['skills_held_for_review']} skills wait for review in the admin, "
                f"{result['lessons_flagged']} lessons were flagged by the screen and "
                f"{result['lessons_unapproved']} lost an approval."
            )

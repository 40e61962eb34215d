from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from apps.core.progress import show_progress, wrote_json
from apps.portability.services.export import ORGANIZATION, SCOPE, Selection, archive_export
from apps.privacy.services.subjects import CLIENT, USER, subject_resolve
from apps.tenancy.commands import organization_named, refuse_invalid
from apps.tenancy.services import validate_scope


class Command(BaseCommand):
    help = (
        "Export an organisation, one scope, one end user (everything erasing them would delete) or one client's "
        "writes into an archive file (JSON Lines per kind and a manifest, zipped)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True, help="Organisation name.")
        which = parser.add_mutually_exclusive_group()
        which.add_argument("--scope", help="Only this scope.")
        which.add_argument("--user", help="Only this end user (their user_id), in every scope.")
        which.add_argument("--client", help="Only what this client (its id) wrote.")
        parser.add_argument("--out", required=True, help="Path of the archive to write (e.g. backup.zip).")
        parser.add_argument("--json", action="store_true", help="Print the manifest as JSON, no progress bar.")

    def handle(self, *args, **options):
        organization = organization_named(options["org"])
        if options["scope"] is not None:
            with refuse_invalid():
                selection = Selection(organization=organization, kind=SCOPE, scope=validate_scope(options["scope"]))
        elif options["user"] is not None or options["client"] is not None:
            kind, value = (USER, options["user"]) if options["user"] is not None else (CLIENT, options["client"])
            subject = subject_resolve(organization=organization, kind=kind, subject_id=value)
            if not subject.exists:
                raise CommandError(f"No {'end user' if kind == USER else 'client'} {value!r} in {organization.name!r}.")
            selection = Selection(organization=organization, kind=kind, subject=subject)
        else:
            selection = Selection(organization=organization, kind=ORGANIZATION)
        path = Path(options["out"])
        if path.parent and not path.parent.exists():
            raise CommandError(f"Directory {str(path.parent)!r} does not exist.")
        manifest = archive_export(
            selection=selection, path=path, on_progress=None if options["json"] else show_progress
        )
        if wrote_json(self, options, {"path": str(path), **manifest}):
            return
        rows = {name: entry["rows"] for name, entry in manifest["files"].items() if entry["rows"]}
        self.stdout.write(self.style.SUCCESS(f"Wrote {path}: {sum(rows.values())} rows ({rows})."))

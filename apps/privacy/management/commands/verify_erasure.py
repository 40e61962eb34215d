"""What is left of a user or a client, per table and in Redis (0 everywhere after an erasure)."""

from django.core.management.base import BaseCommand, CommandError

from apps.core.progress import wrote_json
from apps.core.validation import is_uuid
from apps.privacy.services.subjects import CLIENT, USER, subject_resolve
from apps.privacy.services.verify import subject_verify
from apps.tenancy.commands import organization_named
from apps.tenancy.models import Client


class Command(BaseCommand):
    help = (
        "Scan every table that can hold a subject's data (by provenance), every table that can hold derived text "
        "(for the subject's own words) and Redis, and print the residual count per table."
    )

    def add_arguments(self, parser):
        subject = parser.add_mutually_exclusive_group(required=True)
        subject.add_argument("--user", help="The end user's user_id (with --org).")
        subject.add_argument("--client", help="The client's id.")
        parser.add_argument("--org", help="The organisation's name (required with --user).")
        parser.add_argument("--no-redis", action="store_true", help="Skip the Redis scan.")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **options):
        if options["user"] is not None:
            if not options["org"]:
                raise CommandError("--user needs --org NAME.")
            organization = organization_named(options["org"])
            kind, subject_id = USER, options["user"]
        else:
            client = (
                Client.objects.select_related("organization").filter(pk=options["client"]).first()
                if is_uuid(options["client"])
                else None
            )
            if client is None:
                raise CommandError(f"No client with id {options['client']!r}.")
            organization, kind, subject_id = client.organization, CLIENT, str(client.pk)
        subject = subject_resolve(organization=organization, kind=kind, subject_id=subject_id)
        result = subject_verify(subject=subject, include_redis=not options["no_redis"])
        subject_of = {"kind": kind, "id": subject_id, "organization": organization.name}
        if wrote_json(self, options, {"subject": subject_of, **result}):
            return
        width = max(len(table) for table in [*result["tables"], *result["text"]["tables"]])
        for table, count in result["tables"].items():
            self.stdout.write(f"{table:<{width}}  {count}")
        text = result["text"]
        for column, count in text["tables"].items():
            self.stdout.write(f"{column:<{width}}  {count}  [holds the subject's words]")
        self.stdout.write(
            f"{'text scan':<{width}}  {sum(text['tables'].values())}  [{text['fingerprint']} runs of the subject's words "
            "looked for; an erasure looks for them before its turns go]"
        )
        if "redis" in result:
            redis = result["redis"]
            note = f" ({redis['error']})" if "error" in redis else ""
            self.stdout.write(
                f"{'redis':<{width}}  {redis['matches']}  [{redis['keys_scanned']} keys, {redis['entries_scanned']} entries scanned]{note}"
            )
        style = self.style.SUCCESS if result["total"] == 0 else self.style.ERROR
        self.stdout.write(style(f"residual total: {result['total']}"))

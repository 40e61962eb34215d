import json

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from apps.core.progress import show_progress, wrote_json
from apps.memories.services.dates import dates_normalize, dates_normalize_enqueue
from apps.tenancy.commands import add_owner_arguments, organization_named
from apps.tenancy.models import EndUser
from apps.tenancy.services import validate_scope


class Command(BaseCommand):
    help = (
        "Resolve the date expressions of stored turns (both session tags) and memories again with the current "
        'resolver ("yesterday", "last May", "in 2022"), so time windows in searches find them. Idempotent '
        "and resumable: rows already dated as the resolver says are left alone."
    )

    def add_arguments(self, parser):
        add_owner_arguments(parser)
        parser.add_argument("--batch-size", type=int, default=500, help="Rows per transaction (default 500).")
        parser.add_argument("--background", action="store_true", help="Queue it as a task instead; print its id.")
        parser.add_argument("--json", action="store_true", help="Print the result as JSON, no progress bar.")

    def handle(self, *args, **options):
        organization = organization_named(options["org"])
        scope, user_id = options["scope"], options["user"]
        if scope is not None:
            try:
                scope = validate_scope(scope)
            except Exception as exc:
                raise CommandError("; ".join(getattr(exc, "messages", [str(exc)]))) from None
        if user_id is not None and not EndUser.objects.filter(organization=organization, user_id=user_id).exists():
            raise CommandError(f"No end user {user_id!r} in {organization.name!r}.")
        if options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1.")
        if options["background"]:
            with transaction.atomic():
                task = dates_normalize_enqueue(organization=organization, scope=scope, user_id=user_id)
            self.stdout.write(json.dumps({"task_id": str(task.pk)}) if options["json"] else f"Queued task {task.pk}.")
            return
        result = dates_normalize(
            organization=organization,
            scope=scope,
            user_id=user_id,
            batch_size=options["batch_size"],
            on_progress=None if options["json"] else show_progress,
        )
        if wrote_json(self, options, result):
            return
        counts = ", ".join(
            f"{name} {result[name]['changed']} of {result[name]['read']}" for name in result if name != "changed"
        )
        if result["changed"]:
            self.stdout.write(self.style.SUCCESS(f"Re-dated {result['changed']} rows ({counts})."))
        else:
            self.stdout.write(self.style.SUCCESS(f"Nothing to change: every row is already dated ({counts})."))

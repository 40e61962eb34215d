"""Compile topic pages now, in this process (the pipeline does the same in the background)."""

from django.core.management.base import BaseCommand, CommandError

from apps.core.progress import wrote_json
from apps.pipeline.locks import advisory_lock
from apps.profiles.handlers import OWNER_LOCKS
from apps.profiles.services.topics import topics_compile
from apps.tenancy.commands import add_owner_arguments, organization_named
from apps.tenancy.models import EndUser


class Command(BaseCommand):
    help = "Compile the topic pages of an organisation's users (or of one scope, or of one user) and report the result."

    def add_arguments(self, parser):
        add_owner_arguments(parser, user="Only this user (their user_id).")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **options):
        organization = organization_named(options["org"])
        end_user = None
        if options["user"]:
            end_user = EndUser.objects.filter(organization=organization, user_id=options["user"]).first()
            if end_user is None:
                raise CommandError(f"No user {options['user']!r} in organisation {organization.name!r}.")
        result = topics_compile(
            organization=organization,
            scope=options["scope"],
            end_user=end_user,
            lock=lambda user: advisory_lock(OWNER_LOCKS.key(organization_id=organization.pk, end_user_id=user.pk)),
        )
        if wrote_json(self, options, result):
            return
        scopes = ", ".join(result["scopes"]) or "none"
        self.stdout.write(f"Scopes compiled: {scopes} ({result['owners']} users, {result['items']} items)")
        self.stdout.write(
            f"Topics: {result['topics']}; pages created {result['created']}, updated {result['updated']}, "
            f"unchanged {result['unchanged']}, archived {result['archived']}"
        )
        self.stdout.write(f"Items left as noise: {result['noise']}")
        self.stdout.write(
            f"Tokens: {result['prompt_tokens']} prompt, {result['completion_tokens']} completion; "
            f"{result['seconds']:.2f} s"
        )
        self.stdout.write(self.style.SUCCESS("Topic pages compiled."))

"""Distil sealed task sessions now, in this process (the pipeline does the same in the background)."""

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from apps.conversations.models import Session, SessionTag
from apps.core.errors import ConflictError
from apps.core.progress import wrote_json
from apps.pipeline.locks import LockNotAvailable
from apps.skills.services.distill import session_distill_locked
from apps.skills.services.evolve.run import skills_evolve_locked


class Command(BaseCommand):
    help = "Distil sealed task sessions into skill experiences (and optionally evolve skills right away)."

    def add_arguments(self, parser):
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--session", help="A session's primary key, or its session_id together with --user.")
        target.add_argument("--all-sealed", action="store_true", help="Every sealed task session not distilled yet.")
        parser.add_argument("--user", help="The owner's user_id when --session is a session_id.")
        parser.add_argument("--org", help="Organisation name, to disambiguate a session_id.")
        parser.add_argument("--scope", help="Scope, to disambiguate a session_id (ids are unique per user and scope).")
        parser.add_argument("--evolve", action="store_true", help="Run evolution for the touched scopes afterwards.")
        parser.add_argument("--json", action="store_true")

    def _sessions(self, options):
        queryset = Session.objects.select_related("organization")
        if options["all_sealed"]:
            return list(
                queryset.filter(
                    session_tag=SessionTag.TASK, status=Session.Status.SEALED, distilled_at__isnull=True
                ).order_by("sealed_at", "id")
            )
        value = options["session"]
        if options["user"]:
            matches = queryset.filter(session_id=value, end_user__user_id=options["user"])
            if options["org"]:
                matches = matches.filter(organization__name=options["org"])
            if options["scope"]:
                matches = matches.filter(scope=options["scope"])
            matches = list(matches[:2])
            if len(matches) > 1:
                raise CommandError(
                    "That session_id and user exist in several organisations or scopes; add --org or --scope."
                )
        else:
            try:
                matches = list(queryset.filter(pk=value))
            except (ValidationError, ValueError):
                matches = []
        if not matches:
            raise CommandError(
                f"No session {value!r}"
                + (f" of user {options['user']!r}." if options["user"] else "; pass --user with a session_id.")
            )
        return matches

    def handle(self, *args, **options):
        sessions = self._sessions(options)
        results, scopes = [], {}
        for session in sessions:
            try:
                result = session_distill_locked(session=session)
            except (ConflictError, LockNotAvailable) as exc:
                result = {"error": str(exc)}
            results.append({"session": str(session.pk), "session_id": session.session_id, **result})
            if result.get("experiences"):
                scopes[(session.organization_id, session.scope)] = session.organization
        evolutions = []
        if options["evolve"]:
            for (_, scope), organization in scopes.items():
                while True:
                    outcome = skills_evolve_locked(organization=organization, scope=scope)
                    evolutions.append({"organization": organization.name, "scope": scope, **outcome})
                    if not outcome["remaining"] or not (outcome["consumed"] or outcome["superseded"]):
                        break
        summary = {
            "sessions": len(results),
            "experiences": sum(item.get("experiences", 0) for item in results),
            "errors": sum(1 for item in results if "error" in item),
            "results": results,
            "evolutions": evolutions,
        }
        if wrote_json(self, options, summary, default=str):
            return
        for item in results:
            line = item.get("error") or f"{item.get('experiences', 0)} experiences" + (
                f" ({item['skipped']})" if item.get("skipped") else ""
            )
            self.stdout.write(f"{item['session_id']}: {line}")
        for item in evolutions:
            self.stdout.write(
                f"evolved {item['organization']}/{item['scope']}: created {len(item.get('created', []))}, "
                f"edited {len(item.get('edited', []))}, {item['remaining']} experiences still pending"
            )
        self.stdout.write(
            self.style.SUCCESS(f"Distilled {summary['sessions']} sessions into {summary['experiences']} experiences.")
        )

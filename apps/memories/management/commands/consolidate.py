"""Consolidate memories now, in this process: the same work as POST memory/consolidate, recorded as a task."""

import functools

from django.core.management.base import BaseCommand, CommandError

from apps.core.progress import show_progress, wrote_json
from apps.memories.models import EpisodicMemory, SemanticMemory
from apps.memories.services.consolidate import CONSOLIDATE_MEMORIES, consolidation_run
from apps.pipeline.locks import LockNotAvailable
from apps.pipeline.services import task_run_here
from apps.tenancy.commands import add_owner_arguments, organization_named
from apps.tenancy.models import EndUser


class Command(BaseCommand):
    help = (
        "Merge duplicate and paraphrased memories and resolve contradicting ones (with an LLM; flagged for "
        "review without one) for one user or every user of a scope. Nothing is deleted without a history row."
    )

    def add_arguments(self, parser):
        add_owner_arguments(
            parser,
            scope="One scope; default: every scope of the organisation holding memories.",
            user="One user's user_id; default: every user of the scope(s).",
        )
        parser.add_argument("--dry-run", action="store_true", help="Report what would happen; change nothing.")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, org, scope, user, dry_run, **options):
        organization = organization_named(org)
        end_user = None
        if user:
            end_user = EndUser.objects.filter(organization=organization, user_id=user).first()
            if end_user is None:
                raise CommandError(f"No user {user!r} in organisation {org!r}.")
        scopes = [scope] if scope else self._scopes(organization, end_user)
        payload = {"end_user": str(end_user.pk) if end_user else None, "dry_run": dry_run}
        reports = []
        for one_scope in scopes:
            try:
                task = task_run_here(
                    CONSOLIDATE_MEMORIES,
                    payload,
                    organization=organization,
                    scope=one_scope,
                    body=lambda task, one_scope=one_scope: consolidation_run(
                        task=task,
                        progress=None
                        if options["json"]
                        else functools.partial(show_progress, f"consolidating {one_scope}"),
                    ),
                )
            except LockNotAvailable as exc:
                raise CommandError(f"{exc}; extraction or an erasure is running for this user, try again.") from None
            reports.append({"task_id": str(task.pk), **task.result})
        if wrote_json(self, options, {"organization": org, "user_id": user, "results": reports}):
            return
        for report in reports:
            verb = "would merge" if report["dry_run"] else "merged"
            self.stdout.write(
                f"scope {report['scope']}: examined {report['examined']} memories of {report['users']} user(s); "
                f"{verb} {report['merged']}, {'would retire' if report['dry_run'] else 'retired'} "
                f"{report['retired']}, flagged {report['flagged']} for review ({report['seconds']} s, "
                f"task {report['task_id']})"
            )
            for merge in report["merges"]:
                self.stdout.write(f"  merge {merge['memory_type']} {', '.join(merge['merged'])} -> {merge['survivor']}")
            for retired in report["retirements"]:
                self.stdout.write(f"  retire {retired['memory_type']} {retired['id']} ({retired['reason']})")
            for flag in report["flags"]:
                self.stdout.write(f"  review {flag['memory_type']} {' / '.join(flag['ids'])}: {flag['reason']}")

    @staticmethod
    def _scopes(organization, end_user) -> list[str]:
        scopes = set()
        for model in (EpisodicMemory, SemanticMemory):
            rows = model.objects.filter(organization=organization, deleted_at__isnull=True)
            if end_user is not None:
                rows = rows.filter(end_user=end_user)
            scopes |= set(rows.values_list("scope", flat=True).distinct())
        return sorted(scopes)

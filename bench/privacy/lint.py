"""Lint after erasure (`python -m bench profiles_lint`): when what a compiled page quotes is erased, is
the page flagged stale and, within one beat cycle, recompiled from what remains or archived, and are
other users' pages left alone?"""

import uuid
from pathlib import Path

from bench.common import Stopwatch, run_pending_tasks, write_result
from bench.data import ingest, load


def _pages_citing(subject) -> set:
    """Active pages of other owners that quote one of the subject's items (before it is erased)."""
    from apps.profiles.models import Profile

    pages = Profile.objects.filter(status=Profile.Status.ACTIVE, pk__in=subject.profile_sources().values("profile_id"))
    if subject.end_user is not None:
        pages = pages.exclude(end_user=subject.end_user)
    return set(pages.values_list("pk", flat=True))


def _erase(organization, requester, kind: str, subject_id: str) -> tuple[set, float]:
    """Erases a subject through the pipeline; returns the pages that had cited it and the seconds taken."""
    from apps.privacy.services.erasure import erasure_request
    from apps.privacy.services.subjects import subject_resolve

    subject = subject_resolve(organization=organization, kind=kind, subject_id=subject_id)
    citing = _pages_citing(subject)
    with Stopwatch() as watch:
        erasure_request(subject=subject, requested_by=requester)
        run_pending_tasks(organization, task_types=["erase_subject"])
    return citing, watch.seconds


def _beat_cycle(organization) -> float:
    """One beat cycle: the hourly lint job (organisation-wide, as beat queues it), then every task
    queued by it or by the erasure (the compiles' debounce is over, as a worker would see it)."""
    from apps.pipeline.services import task_execute
    from apps.profiles.tasks import enqueue_lint

    with Stopwatch() as watch:
        task_execute(task_id=enqueue_lint(), worker="bench")
        run_pending_tasks(organization)
    return watch.seconds


def _lint_state(organization, pages: set) -> dict:
    from apps.profiles.models import LintFinding, Profile
    from apps.profiles.services.lint import _pages_with_missing_sources

    profiles = Profile.objects.filter(pk__in=pages)
    return {
        "open_stale_findings": LintFinding.objects.filter(
            profile__in=pages, kind=LintFinding.Kind.STALE, status=LintFinding.Status.OPEN
        ).count(),
        "recompiled": profiles.filter(status=Profile.Status.ACTIVE).exclude(markdown="").count(),
        "archived": profiles.filter(status=Profile.Status.ARCHIVED).count(),
        "active_pages_citing_missing_items": len(_pages_with_missing_sources(organization.pk)),
    }


def run(output_dir: Path, *, log=print) -> dict:
    """Lint after erasure, on one LOCOMO conversation kept by two end users (each side of the chat
    has its own agent, so both users' memories hold pages of the same two people):

    1. user erasure: erase `side-b`. Pages belong to one user and quote only that user's items, so
       the pages of `side-a` that cited `side-b`'s items must number 0, and get 0 stale findings;
    2. client erasure: `side-a`'s sessions were written alternately by two writer clients; erasing
       one clears every page that quoted it with a `stale` finding; one beat cycle later each of
       them is recompiled from what remains or archived.
    """
    from django.test import override_settings

    from apps.profiles.models import LintFinding, Profile
    from apps.tenancy.models import Organization
    from apps.tenancy.services import client_create, organization_create

    sample = load("locomo-dev.json")[0]
    organization = organization_create(name=f"bench-lint-{uuid.uuid4().hex[:8]}")
    admin, _ = client_create(organization=organization, name="eraser", write_scope="bench", can_erase=True)
    first, _ = client_create(organization=organization, name="writer-1", write_scope="bench")
    second, _ = client_create(organization=organization, name="writer-2", write_scope="bench")
    results: dict = {"conversation": sample["sample_id"]}
    try:
        with override_settings(LLM_PROVIDER="rules"):
            turns = len(ingest(None, sample, user_id="side-a", writers=(first, second)))
            ingest(first, sample, user_id="side-b")
            run_pending_tasks(organization)
            results["turns_per_user"] = turns
            results["pages_before"] = Profile.objects.filter(organization=organization, status="active").count()
            unchanged = dict(Profile.objects.filter(end_user__user_id="side-a").values_list("pk", "revision"))

            citing, seconds = _erase(organization, admin, "user", "side-b")
            stale = LintFinding.objects.filter(profile__organization=organization, kind=LintFinding.Kind.STALE).count()
            cycle = _beat_cycle(organization)
            results["user_erasure"] = {
                "pages_of_other_users_citing_the_user": len(citing),
                "stale_findings": stale,
                "pages_left": Profile.objects.filter(organization=organization).count(),
                "side_a_pages_unchanged": unchanged
                == dict(Profile.objects.filter(end_user__user_id="side-a").values_list("pk", "revision")),
                "erasure_seconds": round(seconds, 2),
                "beat_cycle_seconds": round(cycle, 2),
                **_lint_state(organization, citing),
            }

            citing, seconds = _erase(organization, admin, "client", str(second.pk))
            stale = LintFinding.objects.filter(
                profile__in=citing, kind=LintFinding.Kind.STALE, status=LintFinding.Status.OPEN
            ).count()
            cycle = _beat_cycle(organization)
            results["client_erasure"] = {
                "pages_citing_the_client": len(citing),
                "stale_findings": stale,
                "erasure_seconds": round(seconds, 2),
                "beat_cycle_seconds": round(cycle, 2),
                **_lint_state(organization, citing),
            }
    finally:
        Organization.objects.filter(pk=organization.pk).delete()

    for step in ("user_erasure", "client_erasure"):
        log(f"{step}: {results[step]}")
    log(f"written to {write_result(output_dir, 'profiles_lint', results)}")
    return results

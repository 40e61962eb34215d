"""Lint of compiled pages by SQL joins over their provenance: `stale` and `orphan` pages (some or all quoted
items gone) are recompiled or archived; with an LLM, contradicting pages of one user are flagged."""

import itertools
import logging

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from pydantic import BaseModel

from apps.conversations.models import Message
from apps.memories.models import EpisodicMemory, SemanticMemory
from apps.profiles.models import Entity, LintFinding, Mention, Profile, ProfileSource
from apps.profiles.services.compile import page_archive
from apps.profiles.services.entities import owner_edges_recompute, page_recompile_enqueue
from apps.providers.llm import LLMError, chat_json, llm_enabled, parse_items
from apps.providers.tokens import estimate_tokens, fit_text, room_for, token_batches

logger = logging.getLogger(__name__)


def _missing_sql(alias: str) -> str:
    """SQL true when the row of `alias` (profile sources or mentions) points to an item that is gone."""
    return f"""NOT CASE {alias}.item_type
        WHEN 'message' THEN EXISTS (SELECT 1 FROM {Message._meta.db_table} i WHERE i.id = {alias}.item_id)
        WHEN 'episodic' THEN EXISTS (SELECT 1 FROM {EpisodicMemory._meta.db_table} i WHERE i.id = {alias}.item_id AND i.deleted_at IS NULL)
        WHEN 'semantic' THEN EXISTS (SELECT 1 FROM {SemanticMemory._meta.db_table} i WHERE i.id = {alias}.item_id AND i.deleted_at IS NULL)
        ELSE FALSE END"""


def _pages_with_missing_sources(organization_id=None, profile=None) -> list[tuple]:
    """(profile id, sources, missing) of every active page (or of one) that quotes an item that is gone."""
    where, params = "", []
    if organization_id:
        where, params = "AND p.organization_id = %s", [organization_id]
    if profile is not None:
        where, params = f"{where} AND p.id = %s", [*params, profile.pk]
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT p.id, count(*), count(*) FILTER (WHERE {_missing_sql("s")})
            FROM {Profile._meta.db_table} p JOIN {ProfileSource._meta.db_table} s ON s.profile_id = p.id
            WHERE p.status = 'active' {where}
            GROUP BY p.id
            HAVING count(*) FILTER (WHERE {_missing_sql("s")}) > 0
            """,
            params,
        )
        return cursor.fetchall()


SEVERITY = {LintFinding.Kind.STALE: LintFinding.Severity.INFO}  # the other kinds: WARNING


def _finding(profile: Profile, kind: str, detail: str, peer=None) -> bool:
    """Opens a finding unless one of the same kind (and peer) is open already."""
    if profile.findings.filter(status=LintFinding.Status.OPEN, kind=kind, peer=peer).exists():
        return False
    severity = SEVERITY.get(kind, LintFinding.Severity.WARNING)
    LintFinding.objects.create(profile=profile, kind=kind, severity=severity, detail=detail, peer=peer)
    return True


def _prune_dangling_mentions(organization_id=None) -> int:
    mentions = Mention._meta.db_table
    where = "AND e.organization_id = %s" if organization_id else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            DELETE FROM {mentions} m USING {Entity._meta.db_table} e
            WHERE e.id = m.entity_id {where} AND {_missing_sql("m")}
            RETURNING e.organization_id, e.scope, e.end_user_id
            """,
            [organization_id] if organization_id else [],
        )
        owners = set(cursor.fetchall())
    for organization, scope, end_user in owners:
        owner_edges_recompute(organization_id=organization, scope=scope, end_user_id=end_user)
    return len(owners)


ISSUES_REPORTED = 200


def _issues(pages) -> tuple[list[dict], int]:
    """The open findings of these pages, newest first (the first ISSUES_REPORTED), and how many."""
    findings = LintFinding.objects.filter(profile__in=pages, status=LintFinding.Status.OPEN)
    rows = findings.select_related("profile").order_by("-created_at", "id")[:ISSUES_REPORTED]
    issues = [
        {
            "finding_id": str(finding.pk),
            "page_id": str(finding.profile_id),
            "page": finding.profile.name,
            "page_kind": finding.profile.kind,
            "finding": finding.kind,
            "severity": finding.severity,
            "detail": finding.detail,
            "peer_id": str(finding.peer_id) if finding.peer_id else None,
            "created_at": finding.created_at.isoformat(),
        }
        for finding in rows
    ]
    return issues, findings.count()


def profiles_lint(*, organization_id=None, profile: Profile | None = None, task=None) -> dict:
    """Lints one organisation's pages, all, or one page: counts of what it found, and the open issues."""
    counts = {"stale": 0, "orphan": 0, "contradiction": 0, "recompiles": 0}
    if profile is not None:
        organization_id = profile.organization_id
    with transaction.atomic():
        _prune_dangling_mentions(organization_id)
    for profile_id, total, missing in _pages_with_missing_sources(organization_id, profile):
        page = Profile.objects.select_related("entity", "organization", "end_user").get(pk=profile_id)
        if missing == total:
            detail = f"All {total} items this page quoted are gone; the page was archived."
            counts["orphan"] += _finding(page, LintFinding.Kind.ORPHAN, detail)
            page_archive(profile=page)
        else:
            detail = f"{missing} of the {total} items this page quoted are gone; it is being recompiled."
            counts["stale"] += _finding(page, LintFinding.Kind.STALE, detail)
            page_recompile_enqueue(profile=page)
            counts["recompiles"] += 1
    if settings.PROFILE_LINT_CONTRADICTIONS and llm_enabled():
        counts["contradiction"] = _contradictions(organization_id, task=task, profile=profile)
    pages = Profile.objects.filter(organization_id=organization_id) if organization_id else Profile.objects.all()
    counts["issues"], counts["issues_total"] = _issues(pages.filter(pk=profile.pk) if profile is not None else pages)
    return counts


class ContradictionAnswer(BaseModel):
    page: int
    peer: int
    detail: str = ""


class ContradictionsAnswer(BaseModel):
    """What the contradiction check answers."""

    contradictions: list[ContradictionAnswer]


LINT_PROMPT = (
    "You check numbered profile pages of people in one user's memory for statements that "
    "contradict each other. Report only clear contradictions stated in the pages. Answer with "
    'JSON: {"contradictions": [{"page": n, "peer": m, "detail": "..."}]}, an empty list if none.'
)


def _page_groups(owned: list[Profile]) -> list[list[tuple[Profile, str]]]:
    """The pages to show together: all when they fit, else every pair of half-room groups, so every two meet."""
    room = room_for(LINT_PROMPT)
    pages = [(page, fit_text(page.markdown, room // 2 - 8)) for page in owned]
    groups = token_batches(pages, cost=lambda pair: estimate_tokens(pair[1]) + 8, budget=room // 2)
    if len(groups) <= 2:
        return [[pair for group in groups for pair in group]]
    return [first + second for first, second in itertools.combinations(groups, 2)]


def _contradictions(organization_id, *, task, profile=None) -> int:
    """Asks the model, per user, whether any two of their active pages (or `profile` and another) contradict."""
    pages = Profile.objects.filter(status=Profile.Status.ACTIVE).select_related("organization")
    if organization_id:
        pages = pages.filter(organization_id=organization_id)
    if profile is not None:
        pages = pages.filter(scope=profile.scope, end_user_id=profile.end_user_id)
    by_owner: dict = {}
    for page in pages.order_by("name"):
        by_owner.setdefault((page.organization_id, page.scope, page.end_user_id), []).append(page)
    return sum(
        _check_pages(shown, task=task)
        for owned in by_owner.values()
        if len(owned) >= 2
        for shown in _page_groups(owned)
    )


def _check_pages(shown: list[tuple[Profile, str]], *, task) -> int:
    numbered = "\n\n".join(f"[{number}] {text}" for number, (_, text) in enumerate(shown, 1))
    try:
        data = chat_json(
            messages=[{"role": "system", "content": LINT_PROMPT}, {"role": "user", "content": numbered}],
            answer=ContradictionsAnswer,
            organization=shown[0][0].organization,
            task=task,
            purpose="lint_profiles",
        )
    except LLMError as exc:
        logger.warning("contradiction check failed: %s", type(exc).__name__)
        return 0
    values = data.get("contradictions")
    found = 0
    for _, item in parse_items(ContradictionAnswer, values if isinstance(values, list) else [])[0]:
        if not all(0 < n <= len(shown) for n in (item.page, item.peer)) or item.page == item.peer:
            continue
        page, peer = shown[item.page - 1][0], shown[item.peer - 1][0]
        found += _finding(page, LintFinding.Kind.CONTRADICTION, item.detail[:2000], peer=peer)
    return found


def finding_resolve(*, finding: LintFinding, actor: str) -> LintFinding:
    if finding.status == LintFinding.Status.OPEN:
        finding.status = LintFinding.Status.RESOLVED
        finding.resolved_by, finding.resolved_at = actor[:255], timezone.now()
        finding.save(update_fields=["status", "resolved_by", "resolved_at", "updated_at"])
    return finding


def profiles_mark_stale(*, item_type: str, item_id, detail: str) -> int:
    """Every active page quoting an item that changed gets a `stale` finding and a recompile; returns how many."""
    pages = list(
        Profile.objects.filter(status=Profile.Status.ACTIVE, sources__item_type=item_type, sources__item_id=item_id)
        .select_related("organization", "end_user")
        .distinct()
    )
    for profile in pages:
        _finding(profile, LintFinding.Kind.STALE, detail)
        page_recompile_enqueue(profile=profile)
    return len(pages)

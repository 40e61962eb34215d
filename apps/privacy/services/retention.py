"""Retention: transcripts are kept only as long as they are needed to learn from.

Turns of sessions that were distilled or extracted more than CONVERSATION_RETENTION_DAYS ago
are deleted once they themselves were learned from (`distilled_at` set, also before the
cutoff); a turn nothing learned from yet is never pruned. Experiences and skills keep their
evidence quotes, the learned product, cut to EVIDENCE_MAX_CHARS.
"""

import logging
from collections import Counter
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from apps.conversations.models import Message, Session
from apps.profiles.services.lint import profiles_lint
from apps.skills.models import Skill, SkillExperience
from apps.skills.services.skills import skill_update

logger = logging.getLogger(__name__)

PRUNE_RETENTION = "prune_retention"
RETENTION_ACTOR = "retention"


def prunable_messages(*, cutoff):
    learned = Session.objects.filter(Q(distilled_at__lt=cutoff) | Q(extracted_at__lt=cutoff))
    return Message.objects.filter(session__in=learned.values("pk"), distilled_at__isnull=False, distilled_at__lt=cutoff)


def _prune_turns(*, cutoff, batch_size: int) -> Counter:
    per_organization: Counter = Counter()
    queryset = prunable_messages(cutoff=cutoff)
    while True:
        with transaction.atomic():
            rows = list(queryset.values_list("pk", "session_id", "organization_id")[:batch_size])
            Message.objects.filter(pk__in=[row[0] for row in rows]).delete()
            by_count: dict[int, list] = {}
            for session_id, count in Counter(row[1] for row in rows).items():
                by_count.setdefault(count, []).append(session_id)
            for count, session_ids in by_count.items():
                Session.objects.filter(pk__in=session_ids).update(
                    message_count=Greatest(F("message_count") - count, Value(0)), updated_at=timezone.now()
                )
        per_organization.update(str(row[2]) for row in rows)
        if len(rows) < batch_size:
            return per_organization


def _truncate_experience_quotes(limit: int) -> int:
    table = SkillExperience._meta.db_table
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET evidence = jsonb_set(evidence, '{{quote}}', to_jsonb(left(evidence->>'quote', %s))), "
            f"updated_at = now() WHERE jsonb_typeof(evidence->'quote') = 'string' AND char_length(evidence->>'quote') > %s",
            [limit, limit],
        )
        return cursor.rowcount


def _truncated(value, limit: int):
    if isinstance(value, str):
        return value[:limit]
    if isinstance(value, dict):
        return {key: _truncated(item, limit) for key, item in value.items()}
    if isinstance(value, list):
        return [_truncated(item, limit) for item in value]
    return value


def _truncate_skill_examples(limit: int) -> int:
    """Examples quote requests; a skill whose examples carry a longer text gets a recorded version."""
    table = Skill._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id FROM {table} s WHERE EXISTS (SELECT 1 FROM jsonb_path_query(s.examples, 'strict $.**') v "
            f"WHERE jsonb_typeof(v) = 'string' AND char_length(v #>> '{{}}') > %s)",
            [limit],
        )
        ids = [row[0] for row in cursor.fetchall()]
    for skill in Skill.objects.filter(pk__in=ids).select_related("organization"):
        skill_update(
            skill=skill, changes={"examples": _truncated(skill.examples, limit)}, actor=RETENTION_ACTOR,
            reason=f"evidence quotes cut to {limit} characters",
        )
    return len(ids)


def retention_prune(*, now=None, batch_size: int | None = None) -> dict:
    days = settings.CONVERSATION_RETENTION_DAYS
    if days <= 0:
        logger.info("retention: CONVERSATION_RETENTION_DAYS is 0, transcripts are kept forever")
        return {"enabled": False}
    cutoff = (now or timezone.now()) - timedelta(days=days)
    per_organization = _prune_turns(cutoff=cutoff, batch_size=batch_size or settings.ERASURE_BATCH_SIZE)
    for organization_id, count in sorted(per_organization.items()):
        logger.info("retention: organisation %s: %s learned turn(s) older than %s days pruned", organization_id, count, days)
    limit = settings.EVIDENCE_MAX_CHARS
    result = {
        "enabled": True,
        "cutoff": cutoff.isoformat(),
        "messages": sum(per_organization.values()),
        "per_organization": dict(per_organization),
        "experience_quotes_truncated": _truncate_experience_quotes(limit),
        "skills_examples_truncated": _truncate_skill_examples(limit),
    }
    if result["messages"]:
        # A page quoting a pruned turn gets its lint finding (and recompile) now, not at the next beat.
        result["profiles_lint"] = profiles_lint()
    return result

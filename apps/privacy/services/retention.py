"""Retention: transcripts are kept only as long as they are needed to learn from.
Experiences and skills keep their evidence quotes, the learned product, cut to EVIDENCE_MAX_CHARS."""

import logging
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from apps.conversations.services.deletion import messages_prune_learned
from apps.privacy.services.provenance import strings_mapped
from apps.profiles.services.lint import profiles_lint
from apps.skills.models import Skill, SkillExperience
from apps.skills.services.skills import skill_update

logger = logging.getLogger(__name__)

PRUNE_RETENTION = "prune_retention"
RETENTION_ACTOR = "retention"


def _truncate_experience_quotes(limit: int) -> int:
    table = SkillExperience._meta.db_table
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET evidence = jsonb_set(evidence, '{{quote}}', to_jsonb(left(evidence->>'quote', %s))), "
            f"updated_at = now() WHERE jsonb_typeof(evidence->'quote') = 'string' AND char_length(evidence->>'quote') > %s",
            [limit, limit],
        )
        return cursor.rowcount


def _truncate_skill_examples(limit: int) -> int:
    """A skill whose examples quote a longer request gets a recorded version."""
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
            skill=skill,
            changes={"examples": strings_mapped(skill.examples, lambda text: text[:limit])},
            actor=RETENTION_ACTOR,
            reason=f"evidence quotes cut to {limit} characters",
        )
    return len(ids)


def retention_prune() -> dict:
    days = settings.CONVERSATION_RETENTION_DAYS
    if days <= 0:
        logger.info("retention: CONVERSATION_RETENTION_DAYS is 0, transcripts are kept forever")
        return {"enabled": False}
    cutoff = timezone.now() - timedelta(days=days)
    per_organization = messages_prune_learned(cutoff=cutoff, batch_size=settings.ERASURE_BATCH_SIZE)
    for organization_id, count in sorted(per_organization.items()):
        logger.info(
            "retention: organisation %s: %s learned turn(s) older than %s days pruned", organization_id, count, days
        )
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

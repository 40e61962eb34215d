"""Distillation of sealed task sessions into SkillExperience rows, and the queueing of evolution."""

import logging
from dataclasses import asdict

from django.conf import settings
from django.db import transaction

from apps.conversations.models import Session, SessionTag
from apps.conversations.routing import distillation_enqueue
from apps.conversations.selectors import session_messages
from apps.conversations.services.learning import messages_mark_learned, session_announce_learned
from apps.conversations.writers import turns_held
from apps.core.errors import ConflictError
from apps.pipeline.locks import UserLocks, advisory_lock
from apps.pipeline.models import MemoryTask
from apps.providers.embeddings import embed_texts, embedding_model_name
from apps.providers.llm import llm_enabled
from apps.skills.models import ExperienceType, Skill, SkillExperience
from apps.skills.screen import screen_flags
from apps.skills.selectors import with_retrievals
from apps.skills.services.evolve.run import evolve_enqueue
from apps.skills.services.llm_distiller import llm_lessons
from apps.skills.services.rule_distiller import rule_lessons
from apps.skills.services.skills import skill_announce, skill_update
from apps.skills.trust import visible_q

logger = logging.getLogger(__name__)

EXISTING_SKILLS_IN_PROMPT = 50


DISTILL_LOCKS = UserLocks("distill")  # registered in SkillsConfig.ready


def check_distillable(session: Session) -> None:
    if session.session_tag != SessionTag.TASK:
        raise ConflictError(
            f"Session {session.session_id!r} is a {session.session_tag} session; only task sessions are distilled."
        )
    if session.status != Session.Status.SEALED:
        raise ConflictError(f"Session {session.session_id!r} is not sealed yet; seal it first.")


def distill_request(*, session: Session, client=None) -> MemoryTask:
    check_distillable(session)
    if session.distilled_at is not None:
        raise ConflictError(
            f"Session {session.session_id!r} was already distilled at {session.distilled_at.isoformat()}."
        )
    return distillation_enqueue(session, client=client)


def _existing_skills(session: Session) -> list[dict]:
    """The distiller's prompt shows no skill of another user's."""
    return list(
        with_retrievals(Skill.objects.filter(organization_id=session.organization_id, scope=session.scope))
        .filter(visible_q(session.end_user_id))
        .exclude(status=Skill.Status.ARCHIVED)
        .order_by("-retrieval_count", "name")
        .values("name", "description")[:EXISTING_SKILLS_IN_PROMPT]
    )


def _earlier_teachings(session: Session, lesson):
    """The workflow experiences of the scope with the lesson's action signature and request."""
    if not (lesson.action_signature and lesson.experience_type == ExperienceType.WORTH_LEARNING):
        return SkillExperience.objects.none()
    return SkillExperience.objects.filter(
        organization_id=session.organization_id,
        scope=session.scope,
        experience_type=ExperienceType.WORTH_LEARNING,
        action_signature=lesson.action_signature,
        evidence__quote=lesson.evidence.get("quote", ""),
    )


def _taught_before_by_this_user(session: Session, lesson) -> bool:
    """One person, however many sessions, is one voice: their own repeat adds nothing."""
    return _earlier_teachings(session, lesson).filter(end_user_id=session.end_user_id).exists()


def _vote(*, experience: SkillExperience, actor: str) -> list[Skill]:
    """Another user taught what skills already hold: they join those skills' supporters, the version
    records the experience (its session), and a skill so corroborated is shared at once."""
    earlier = _earlier_teachings(experience.session, experience).exclude(pk=experience.pk)
    skills = list(
        Skill.objects.select_for_update()
        .filter(
            pk__in=Skill.objects.filter(versions__experiences__in=earlier, end_user__isnull=True)
            .exclude(status=Skill.Status.ARCHIVED)
            .values("pk")
        )
        .order_by("pk")
    )
    for skill in skills:
        version = skill.version
        skill = skill_update(
            skill=skill,
            changes={},
            actor=actor,
            reason=f"the same workflow taught by another user (a vote): {experience.title}"[:2000],
            experiences=[experience],
        )
        if skill.version != version:
            skill_announce(skill=skill)
    return skills


def _screened(lesson) -> dict:
    """Evolution copies a lesson's text into skills: one that reads like instructions to the model,
    holds a link or a secret waits for a person."""
    flags = screen_flags(lesson.title, lesson.content)
    return {"flags": flags, "status": SkillExperience.Status.FLAGGED} if flags else {}


def session_distill(*, session: Session, task=None) -> dict:
    """Idempotent; run it under DISTILL_LOCKS.key_of(session) (the handler does)."""
    check_distillable(session)
    if session.distilled_at is not None:
        return {"skipped": "already distilled", "experiences": 0}
    messages = list(session_messages(session=session))
    problems: list[str] = []
    if llm_enabled():
        lessons, problems = llm_lessons(
            session=session, messages=messages, existing_skills=_existing_skills(session), task=task
        )
        distiller = f"llm:{settings.LLM_MODEL}"
    else:
        lessons, distiller = rule_lessons(session=session, messages=messages), "rules"
    kept = [lesson for lesson in lessons if not _taught_before_by_this_user(session, lesson)]
    repeats = {id(lesson) for lesson in kept if _earlier_teachings(session, lesson).exists()}
    experiences = [
        SkillExperience(
            organization_id=session.organization_id,
            scope=session.scope,
            end_user_id=session.end_user_id,
            session=session,
            created_by_id=session.client_id,
            embedding_model=embedding_model_name(),
            **asdict(lesson),
            **_screened(lesson),
        )
        for lesson in kept
    ]
    repeated = [experience for experience, lesson in zip(experiences, kept) if id(lesson) in repeats]
    for experience, vector in zip(
        experiences, embed_texts([experience.embedding_text() for experience in experiences])
    ):
        experience.embedding = vector

    with transaction.atomic():
        # Until this commits, no erasure of a client that wrote the transcript can run (and one that
        # ran since it was read is seen: a turn is gone, the task retries).
        turns_held(organization_id=session.organization_id, turn_ids=[message.pk for message in messages])
        experiences = SkillExperience.objects.bulk_create(experiences)
        voted = [
            experience
            for experience in repeated
            if experience.status == SkillExperience.Status.PENDING
            and _vote(experience=experience, actor=f"distillation:{distiller}")
        ]
        SkillExperience.objects.filter(pk__in=[experience.pk for experience in voted]).update(
            status=SkillExperience.Status.CONSUMED
        )
        messages_mark_learned(session=session, by="distillation", through_seq=messages[-1].seq if messages else 0)
        learnable = [
            experience
            for experience in experiences
            if experience.status == SkillExperience.Status.PENDING and experience not in voted
        ]
        evolve_task = evolve_enqueue(organization=session.organization, scope=session.scope) if learnable else None
        session_announce_learned(session=session, by="distillation", experiences=len(experiences))
    if problems:
        # Counted, not quoted: the problems cite the model's output (kept in the task's result).
        logger.info("distillation of session %s: %s problem(s) with the distiller's answer", session.pk, len(problems))
    return {
        "distiller": distiller,
        "experiences": len(experiences),
        "flagged": len(experiences) - len(learnable),
        "duplicates": len(lessons) - len(kept),
        "votes": len(voted),
        "problems": problems,
        "evolve_task": str(evolve_task.pk) if evolve_task else None,
    }


def session_distill_locked(*, session: Session, task=None) -> dict:
    """Raises LockNotAvailable so the pipeline retries."""
    with advisory_lock(DISTILL_LOCKS.key_of(session), wait=False):
        session.refresh_from_db(fields=["distilled_at", "status", "outcome"])
        return session_distill(session=session, task=task)

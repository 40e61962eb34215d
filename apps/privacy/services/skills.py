"""Skills learned from an erased subject: deleted when the subject was their only source, otherwise
scrubbed of text quoted from the erased experiences and returned to review."""

from django.db import transaction

from apps.skills.models import Skill, SkillExperience, SkillVersion
from apps.skills.services.evolve.rules import copied_texts
from apps.skills.services.rule_distiller import workflow_request
from apps.skills.services.skills import skill_delete, skill_return_to_review
from apps.skills.trust import teachers

SOURCE_ERASED = "source erased"
REDACTED = "[erased]"
# Shorter texts are removed only where they are a whole trigger, never as a substring.
MIN_SUBSTRING_CHARS = 8
SCRUBBED_FIELDS = ("description", "instructions", "triggers", "examples")


def experience_texts(experiences) -> set[str]:
    """What the rule evolver copies, and whole, for the LLM evolver, the content, request and evidence quote."""
    texts = set()
    for experience in experiences:
        request = workflow_request(experience.content)
        evidence = experience.evidence if isinstance(experience.evidence, dict) else {}
        quote = evidence.get("quote") if isinstance(evidence.get("quote"), str) else ""
        folded = " ".join(experience.content.split())
        for text in (experience.content, folded, quote, request, *copied_texts(experience)):
            if text and text.strip():
                texts.add(text.strip())
    return texts


def _mentions(text: str, needles: list[str]) -> bool:
    stripped = text.strip()
    return any(needle == stripped or (len(needle) >= MIN_SUBSTRING_CHARS and needle in text) for needle in needles)


def _redact(text: str, needles: list[str]) -> str:
    for needle in needles:
        if len(needle) >= MIN_SUBSTRING_CHARS:
            text = text.replace(needle, REDACTED)
    return text


def _leaves(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)


def scrub_fields(fields: dict, needles: list[str]) -> dict:
    """The fields that change: what quotes an erased text is dropped, or becomes "[erased]" within a text."""
    scrubbed = {}
    if isinstance(fields.get("triggers"), list):
        scrubbed["triggers"] = [
            item for item in fields["triggers"] if not (isinstance(item, str) and _mentions(item, needles))
        ]
    if isinstance(fields.get("examples"), list):
        scrubbed["examples"] = [
            item for item in fields["examples"] if not any(_mentions(leaf, needles) for leaf in _leaves(item))
        ]
    if isinstance(fields.get("instructions"), str):
        lines = [line for line in fields["instructions"].split("\n") if not (line.strip() and _mentions(line, needles))]
        scrubbed["instructions"] = _redact("\n".join(lines), needles)
    if isinstance(fields.get("description"), str):
        scrubbed["description"] = _redact(fields["description"], needles)
    return {name: value for name, value in scrubbed.items() if value != fields[name]}


def _redact_history(skill: Skill, needles: list[str]) -> int:
    """History keeps its shape, not the quotes."""
    redacted = 0
    for version in SkillVersion.objects.filter(skill=skill):
        snapshot = dict(version.snapshot or {})
        snapshot.update(scrub_fields(snapshot, needles))
        reason = _redact(version.reason, needles)
        if snapshot != version.snapshot or reason != version.reason:
            version.snapshot, version.reason = snapshot, reason
            version.save(update_fields=["snapshot", "reason", "updated_at"])
            redacted += 1
    return redacted


def skills_release(*, experiences, actor: str, own_skills=None) -> dict:
    """One skill per transaction; `own_skills` (a user's personal skills) are deleted outright."""
    counts = {
        "skills.Skill": 0,
        "skills.Skill (returned to review)": 0,
        "skills.SkillVersion (redacted)": 0,
        "skills.SkillVersion.experiences": 0,
    }
    for skill in own_skills if own_skills is not None else ():
        counts["skills.Skill"] += 1
        skill_delete(skill=skill)
    Through = SkillVersion.experiences.through
    erased = experiences.values("pk")
    skill_ids = set(Through.objects.filter(skillexperience__in=erased).values_list("skillversion__skill_id", flat=True))
    for skill_id in skill_ids:
        with transaction.atomic():
            skill = Skill.objects.select_for_update().filter(pk=skill_id).first()
            if skill is None:
                continue
            links = Through.objects.filter(skillversion__skill=skill)
            erased_links = links.filter(skillexperience__in=erased)
            kept_ids = set(links.exclude(skillexperience__in=erased).values_list("skillexperience_id", flat=True))
            if not kept_ids:
                counts["skills.Skill"] += 1
                skill_delete(skill=skill)
                continue
            kept_texts = experience_texts(SkillExperience.objects.filter(pk__in=kept_ids))
            erased_texts = experience_texts(
                SkillExperience.objects.filter(pk__in=erased_links.values("skillexperience_id"))
            )
            # A text another, kept source also contributed is not the erased subject's alone.
            needles = sorted(erased_texts - kept_texts, key=len, reverse=True)
            counts["skills.SkillVersion.experiences"] += erased_links.delete()[0]
            counts["skills.SkillVersion (redacted)"] += _redact_history(skill, needles)
            changes = scrub_fields({name: getattr(skill, name) for name in SCRUBBED_FIELDS}, needles)
            skill = skill_return_to_review(skill=skill, changes=changes, actor=actor, reason=SOURCE_ERASED)
            # Only the users whose lessons remain still taught it (apps.skills.trust).
            Skill.objects.filter(pk=skill.pk).update(
                supporters=sorted(teachers(SkillExperience.objects.filter(pk__in=kept_ids)))
            )
            counts["skills.Skill (returned to review)"] += 1
    return counts

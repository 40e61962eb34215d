"""Act-time retrieval: the top-k active skills for a task, in the caller's read scopes."""

from apps.search.engine import search_source
from apps.skills.search import PROCEDURAL
from apps.skills.services.skills import skills_record_retrieval
from apps.tenancy.readers import Reader


def skills_retrieve(*, reader: Reader, task: str, k: int, user_id: str | None = None) -> list[tuple]:
    """[(skill, score)] by hybrid search over name, description, triggers and instructions.

    With a user_id: the scope's shared skills and those that user taught; without: the shared
    skills only (apps.skills.trust). Each returned skill's retrieval counter moves in one UPDATE.
    """
    filters = {"user_id": user_id} if user_id else {}
    hits = search_source(PROCEDURAL, reader=reader, query=task, method="hybrid", limit=k, filters=filters)
    skills_record_retrieval(skill_ids=[skill.pk for skill, _ in hits])
    return hits

"""The memory types the search engine serves from this app: `episodic` and `semantic`."""

from apps.memories.models import EpisodicMemory, SemanticMemory
from apps.memories.services.memories import EPISODIC, SEMANTIC, embedding_text, memory_snapshot
from apps.search.registry import SearchSource, register_source


def _common(memory) -> dict:
    return {
        "summary": memory.summary,
        "details": memory.details,
        "source_message_ids": [str(message_id) for message_id in memory.source_message_ids],
        "user_id": memory.end_user.user_id,
        "scope": memory.scope,
        "created_at": memory.created_at,
        "updated_at": memory.updated_at,
    }


def episodic_item(memory: EpisodicMemory) -> dict:
    return {
        "occurred_at": memory.occurred_at,
        "time_granularity": memory.time_granularity,
        "actor": memory.actor,
        "event_type": memory.event_type,
        **_common(memory),
    }


def semantic_item(memory: SemanticMemory) -> dict:
    return {"name": memory.name, "source": memory.source, **_common(memory)}


EPISODIC_SOURCE = SearchSource(
    memory_type="episodic",
    model=EpisodicMemory,
    to_item=episodic_item,
    default_method="hybrid",
    # Time range filters ask when the event happened, not when it was remembered.
    time_column="occurred_at",
    event_time_column="occurred_at",
    date_span_column="date_span",
    user_column="end_user_id",
    fuzzy_expression="t.summary",
    extra_where="t.deleted_at IS NULL",
    select_related=("end_user",),
    embedding_text=lambda memory: embedding_text(EPISODIC, memory_snapshot(memory)),
)

SEMANTIC_SOURCE = SearchSource(
    memory_type="semantic",
    model=SemanticMemory,
    to_item=semantic_item,
    default_method="hybrid",
    time_column="updated_at",
    date_span_column="date_span",
    user_column="end_user_id",
    fuzzy_expression="(t.name || ' ' || t.summary)",
    extra_where="t.deleted_at IS NULL",
    select_related=("end_user",),
    embedding_text=lambda memory: embedding_text(SEMANTIC, memory_snapshot(memory)),
)


def register_sources() -> None:
    register_source(EPISODIC_SOURCE)
    register_source(SEMANTIC_SOURCE)

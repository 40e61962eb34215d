"""The memory types the search engine serves from this app: `episodic` and `semantic`."""

from apps.memories.models import EpisodicMemory, SemanticMemory
from apps.memories.selectors import memory_live
from apps.memories.serializers import EpisodicMemoryOutputSerializer, SemanticMemoryOutputSerializer
from apps.memories.services.memories import EPISODIC, SEMANTIC, embedding_text, memory_snapshot
from apps.search.registry import SearchSource, register_source

COMMON_FIELDS = ("summary", "details", "source_message_ids", "user_id", "scope", "created_at", "updated_at")
# What both memory types' sources share.
COMMON = {
    "visible": memory_live,
    "default_method": "hybrid",
    "date_span_column": "date_span",
    "user_column": "end_user_id",
    "select_related": ("end_user",),
}

EPISODIC_SOURCE = SearchSource(
    memory_type="episodic",
    model=EpisodicMemory,
    output=EpisodicMemoryOutputSerializer,
    item_fields=("occurred_at", "time_granularity", "actor", "event_type", *COMMON_FIELDS),
    text=lambda memory: memory.summary,
    # Time range filters ask when the event happened, not when it was remembered.
    time_column="occurred_at",
    event_time_column="occurred_at",
    fuzzy_fields=("summary",),
    embedding_text=lambda memory: embedding_text(EPISODIC, memory_snapshot(memory)),
    **COMMON,
)

SEMANTIC_SOURCE = SearchSource(
    memory_type="semantic",
    model=SemanticMemory,
    output=SemanticMemoryOutputSerializer,
    item_fields=("name", "source", *COMMON_FIELDS),
    text=lambda memory: f"{memory.name}: {memory.summary}",
    time_column="updated_at",
    fuzzy_fields=("name", "summary"),
    embedding_text=lambda memory: embedding_text(SEMANTIC, memory_snapshot(memory)),
    **COMMON,
)


def register_sources() -> None:
    register_source(EPISODIC_SOURCE)
    register_source(SEMANTIC_SOURCE)

"""Reads of episodic and semantic memories, always within the caller's organisation and read scopes."""

from apps.memories.models import EpisodicMemory, SemanticMemory
from apps.tenancy.readers import Reader


def episodic_memory_list(*, reader: Reader):
    """Including soft-deleted rows: a caller may still erase one for good."""
    return reader.rows(EpisodicMemory).select_related("end_user")


def semantic_memory_list(*, reader: Reader):
    """Including soft-deleted rows: a caller may still erase one for good."""
    return reader.rows(SemanticMemory).select_related("end_user")

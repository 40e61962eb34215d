"""Reads of episodic and semantic memories, always within the caller's organisation and read scopes."""

from apps.memories.models import EpisodicMemory, SemanticMemory


def episodic_memory_list(*, client):
    """Including soft-deleted rows: a caller may still erase one for good."""
    return EpisodicMemory.objects.filter(
        organization_id=client.organization_id, scope__in=client.read_scopes
    ).select_related("end_user")


def semantic_memory_list(*, client):
    """Including soft-deleted rows: a caller may still erase one for good."""
    return SemanticMemory.objects.filter(
        organization_id=client.organization_id, scope__in=client.read_scopes
    ).select_related("end_user")

"""REST adapters of apps.memories.operations."""

from apps.core.adapters import delete_view
from apps.memories import operations

EpisodicMemoryDeleteView = delete_view(
    operations.delete_episodic_memory, example="DELETE /api/v1/memory/episodic/3d9f0b7a-1c2e-4f5a-8b6d-9e0c1a2b3c4d"
)
SemanticMemoryDeleteView = delete_view(
    operations.delete_semantic_memory, example="DELETE /api/v1/memory/semantic/3d9f0b7a-1c2e-4f5a-8b6d-9e0c1a2b3c4d"
)

"""The memory endpoints' operations (REST: apps.memories.views; MCP: apps.mcp_server)."""

from apps.core.operations import Access, check_ids, get_or_404, operation, require_write_access
from apps.memories.selectors import episodic_memory_list, semantic_memory_list
from apps.memories.services.memories import memory_delete


def _delete(*, client, queryset, item_id: str) -> None:
    """Deletes one memory and its history for good (soft deletion is extraction's, not the caller's)."""
    check_ids(item_id=item_id)
    memory = get_or_404(queryset, pk=item_id)
    require_write_access(client, memory)
    memory_delete(memory=memory)


@operation(access=Access.WRITE)
def delete_episodic_memory(*, client, item_id: str) -> None:
    """Delete an episodic memory and its history for good."""
    _delete(client=client, queryset=episodic_memory_list(reader=client.reader), item_id=item_id)


@operation(access=Access.WRITE)
def delete_semantic_memory(*, client, item_id: str) -> None:
    """Delete a semantic memory and its history for good."""
    _delete(client=client, queryset=semantic_memory_list(reader=client.reader), item_id=item_id)

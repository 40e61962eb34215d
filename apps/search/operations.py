"""The search endpoints' operations (REST: apps.search.views; MCP: apps.mcp_server)."""

from apps.core.operations import operation, validated
from apps.core.replicas import read_on_replica
from apps.search.engine import SearchAnswer, search
from apps.search.serializers import MemorySearchInputSerializer, SearchAllUsersInputSerializer, SearchOutputSerializer


def _search(*, client, serializer_class, data, from_query: bool) -> dict:
    filters = dict(validated(serializer_class, data, from_query=from_query))
    asked = {
        "query": filters.pop("query"),
        "memory_types": filters.pop("memory_types", None),
        "method": filters.pop("search_method", None),
        "limit": filters.pop("limit"),
        "time_window": filters.pop("time_window", None),
    }

    def searched(reader) -> dict:
        hits = search(reader=reader, filters=filters, **asked)
        # Rendering may read related rows: on the same copy.
        return SearchOutputSerializer(SearchAnswer(query=asked["query"], hits=hits)).data

    return read_on_replica(client, searched)


@operation()  # a search reads, even as a POST: read-only clients may call it
def search_memory(*, client, data, from_query: bool = False) -> dict:
    """Search one user's memories.

    Any memory type (`message`, `episodic`, `semantic`, `procedural`, `experience`, `profile`) by
    `bm25`, `embedding`, `hybrid` or `fuzzy`, in the caller's read scopes. Each result carries its
    type's fields (see the result schema of each `memory_type`)."""
    return _search(client=client, serializer_class=MemorySearchInputSerializer, data=data, from_query=from_query)


@operation()
def search_all_users(*, client, data) -> dict:
    """Search the memories of every user.

    The same search across every user of the caller's organisation, still within its read scopes."""
    return _search(client=client, serializer_class=SearchAllUsersInputSerializer, data=data, from_query=True)

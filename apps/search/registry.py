"""Memory types the search engine can search. Each app registers its own in AppConfig.ready().

The engine builds its SQL from these descriptions, so every type gets the same scoping
(organisation + read scopes inside the SQL) and the same four methods.
"""

from collections.abc import Callable
from dataclasses import dataclass, field

METHODS = ("bm25", "embedding", "hybrid", "fuzzy")


@dataclass(frozen=True)
class SearchSource:
    memory_type: str
    model: type
    # Serialises one row into the result's item fields (id, type and score are added by the engine).
    to_item: Callable
    default_method: str = "hybrid"
    # Columns of the model's table (aliased `t` in the SQL).
    search_vector_column: str = "search_vector"
    embedding_column: str = "embedding"
    time_column: str = "created_at"
    user_column: str | None = "end_user_id"
    # Types whose items one user may be served from another's (skills): SQL over `t` for the items
    # every user of the scope is served, and over `t` and `e` (the caller's tenancy_enduser row) for
    # those one user is served besides. Set, a search naming no user sees only the shared items.
    shared_where: str = ""
    user_where: str = ""
    # Column holding the conversations.Session foreign key, when the type belongs to a session.
    session_column: str | None = None
    # SQL expression over `t` searched by pg_trgm for the fuzzy method.
    fuzzy_expression: str = "t.content"
    # Extra SQL condition over `t` without parameters, e.g. "t.status = 'active'".
    extra_where: str = ""
    # Select_related paths for loading the result rows.
    select_related: tuple[str, ...] = field(default_factory=tuple)
    # Returns how many hits of this type a search of several types keeps at most (None: no cap).
    mixed_cap: Callable[[], int | None] | None = None
    # The text an item's vector encodes (used by the `reembed` command when the model changes).
    embedding_text: Callable | None = None
    # Field values selecting this type's rows of a table other types share (profile and topic pages):
    # what `reembed` stages and switches for the type, as (field, value) pairs (the source is hashable).
    rows: tuple[tuple[str, str], ...] = ()


SOURCES: dict[str, SearchSource] = {}


def register_source(source: SearchSource) -> None:
    SOURCES[source.memory_type] = source

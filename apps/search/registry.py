"""Memory types the search engine can search, each registered by its own app in AppConfig.ready();
the engine builds every method's SQL from these descriptions."""

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

from django.db.models import Q
from rest_framework import serializers
from rest_framework.fields import SkipField

from apps.core.api import projection

METHODS = ("bm25", "embedding", "hybrid", "fuzzy")


@dataclass(frozen=True)
class SearchSource:
    memory_type: str
    model: type
    # The memory type's output, defined once (the serializer its own endpoint renders), and the
    # fields of it a search hit carries besides `id`, `memory_type` and `score`.
    output: type
    item_fields: tuple[str, ...]
    # What a reader sees: `visible(reader, user_id)`, the Q (own columns and subqueries, no joins) the
    # owning app's selectors filter by, pending deletes included; `user_id` is the search's (or None).
    visible: Callable[..., Q]
    # The hit's text as a person reads it, whatever the type (every hit's `text`): one field a typed
    # client renders any hit by.
    text: Callable[..., str]
    # Which of the visible items a search serves (e.g. only active skills), over the model.
    served: Q = field(default_factory=Q)
    default_method: str = "hybrid"
    # Fields of the model, read as columns of its table (aliased `t` in the SQL).
    search_vector_column: str = "search_vector"
    embedding_column: str = "embedding"
    time_column: str = "created_at"
    # What a time window in the question is matched against: when the item happened, and the days its
    # words name (`date_span`). A type with neither is timeless: a window does not filter it.
    event_time_column: str | None = None
    date_span_column: str | None = None
    # The owner a search naming a user filters by; None where `visible` takes the user (skills).
    user_column: str | None = "end_user_id"
    # Column holding the conversations.Session foreign key, when the type belongs to a session.
    session_column: str | None = None
    # The fields pg_trgm searches, joined by spaces (a trigram index on `fuzzy_expression` answers).
    fuzzy_fields: tuple[str, ...] = ("content",)
    # Select_related paths for loading the result rows.
    select_related: tuple[str, ...] = field(default_factory=tuple)
    # The fields `rerank.candidate_of` reads of a candidate (empty: every own field); the kept hits
    # are then read in full.
    candidate_fields: tuple[str, ...] = ()
    # Returns how many hits of this type a search of several types keeps at most (None: no cap).
    mixed_cap: Callable[[], int | None] | None = None
    # The text an item's vector encodes (used by the `reembed` command when the model changes).
    embedding_text: Callable | None = None
    # (field, value) pairs selecting this type's rows of a shared table (profile and topic pages).
    rows: tuple[tuple[str, str], ...] = ()

    @property
    def table(self) -> str:
        return self.model._meta.db_table

    def column(self, name: str) -> str:
        """The column of one of the model's fields (by name or attname), as the SQL names it."""
        return self.model._meta.get_field(name).column

    @property
    def fuzzy_expression(self) -> str:
        """The SQL over `t` the fuzzy method searches, e.g. `(t.name || ' ' || t.description)`."""
        columns = [f"t.{self.column(name)}" for name in self.fuzzy_fields]
        return columns[0] if len(columns) == 1 else "(" + " || ' ' || ".join(columns) + ")"

    def served_rows(self, reader, user_id: str | None = None):
        """The model's rows a search of this type may return to `reader` (visible and served)."""
        return reader.objects(self.model).filter(self.visible(reader, user_id), self.served)

    @functools.cached_property
    def item_serializer(self) -> type:
        return projection(self.output, self.item_fields, name=f"{self.output.__name__.removesuffix('Serializer')}Item")

    @functools.cached_property
    def _item_fields(self) -> list:
        """The item serializer's fields, bound once: a hit is rendered without building a serializer."""
        return list(self.item_serializer()._readable_fields)

    def to_item(self, instance) -> dict:
        """One row's item fields, each by the type's output field, but date-times in Python's ISO form
        (`+00:00`), as hits have always had them."""
        item = {}
        for shown in self._item_fields:
            try:
                value = shown.get_attribute(instance)
            except SkipField:
                continue
            if value is not None:
                iso = isinstance(shown, serializers.DateTimeField)
                value = value.isoformat() if iso else shown.to_representation(value)
            item[shown.field_name] = value
        return item


SOURCES: dict[str, SearchSource] = {}


def register_source(source: SearchSource) -> None:
    SOURCES[source.memory_type] = source

from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_field
from rest_framework import serializers

from apps.core import fields
from apps.core.api import InputSerializer, projection
from apps.core.fields import MemoryTypeField
from apps.core.models import SessionTag
from apps.search.engine import TIME_WINDOW_MODES
from apps.search.registry import METHODS, SOURCES


class CommaSeparatedListField(serializers.ListField):
    """A JSON list in a body, or `a,b` / repeated parameters in a query string."""

    def to_internal_value(self, data):
        if isinstance(data, str) and getattr(self.root, "from_query", False):
            data = [part.strip() for part in data.split(",") if part.strip()]
        return super().to_internal_value(data)


class SearchAllUsersInputSerializer(InputSerializer):
    query = fields.CharField(required=False, allow_blank=True, default="", max_length=2000)
    memory_types = CommaSeparatedListField(child=fields.ChoiceField(choices=()), required=False, allow_empty=False)
    search_method = fields.ChoiceField(choices=METHODS, required=False)
    limit = fields.IntegerField(required=False, min_value=1, max_value=100, default=10)
    session_id = fields.CharField(required=False, max_length=64)
    session_tag = fields.ChoiceField(choices=SessionTag.choices, required=False)
    start = fields.DateTimeField(required=False)
    end = fields.DateTimeField(required=False)
    filter_tags = fields.TagsField(required=False)
    time_window = fields.ChoiceField(
        choices=TIME_WINDOW_MODES,
        required=False,
        help_text="What a time named in the query does (default SEARCH_TIME_WINDOW): filter, boost or off.",
    )

    def get_fields(self):
        declared = super().get_fields()
        # Memory types register themselves when the apps are ready, after this module is imported.
        declared["memory_types"].child.choices = sorted(SOURCES)
        return declared

    def validate_memory_types(self, memory_types):
        return list(dict.fromkeys(memory_types))


class MemorySearchInputSerializer(SearchAllUsersInputSerializer):
    user_id = fields.CharField(max_length=255)


HIT_TEXT_HELP = (
    "The hit as a person reads it, whatever the type: a turn's content, an event's summary, a fact's "
    "`name: summary`, a skill's `name: description`, a lesson's `title: content`, a page's markdown."
)


def result_serializer(source) -> type:
    """A hit of one memory type as the schema shows it: `id`, `memory_type`, `score` and the type's item fields."""
    name = f"{source.memory_type.capitalize()}SearchResultSerializer"
    return projection(
        source.output,
        ("id", *source.item_fields),
        name=name,
        memory_type=MemoryTypeField(source.memory_type),
        score=serializers.FloatField(),
        text=serializers.CharField(help_text=HIT_TEXT_HELP),
    )


def render_hit(hit) -> dict:
    """A hit as its memory type's output shows it (the fields its schema lists)."""
    return {
        "id": str(hit.instance.pk),
        "memory_type": hit.source.memory_type,
        "score": round(hit.score, 6),
        "text": hit.source.text(hit.instance),
        **hit.source.to_item(hit.instance),
    }


RESULT = PolymorphicProxySerializer(
    component_name="SearchResult",
    serializers=lambda: {memory_type: result_serializer(SOURCES[memory_type]) for memory_type in sorted(SOURCES)},
    resource_type_field_name="memory_type",
    many=True,
)


@extend_schema_field(RESULT)
class SearchResultsField(serializers.Field):
    """The hits, each rendered by `render_hit`; the schema is RESULT's (one result schema per memory type)."""

    def to_representation(self, hits):
        return [render_hit(hit) for hit in hits]


class TimeWindowSerializer(serializers.Serializer):
    expression = serializers.CharField(help_text='The words that named the time, e.g. "last May".')
    start = serializers.DateField(help_text="First day of the window.")
    end = serializers.DateField(help_text="Last day of the window.")
    mode = serializers.ChoiceField(
        choices=TIME_WINDOW_MODES,
        help_text="filter: only items of those days (or naming them); boost: those items ranked higher.",
    )


class SearchOutputSerializer(serializers.Serializer):
    # Renders a SearchAnswer (apps.search.engine). The schema lists `results` first, the answer last.
    results = SearchResultsField(source="hits")
    query = serializers.CharField()
    count = serializers.IntegerField()
    reranked_by = serializers.CharField(
        source="hits.reranked_by",
        allow_null=True,
        help_text="The reranker that ordered the results (RERANKER); null: the fused order.",
    )
    decomposed_into = serializers.ListField(
        source="hits.decomposed_into",
        child=serializers.CharField(),
        allow_null=True,
        help_text="The sub-queries searched beside the question (QUERY_DECOMPOSER); null: the question alone.",
    )
    time_window = TimeWindowSerializer(
        source="hits.time_window",
        allow_null=True,
        help_text="The days the query named (resolved against now) and what the search did with them; null: none.",
    )

    def to_representation(self, instance):
        answer = super().to_representation(instance)
        answer["results"] = answer.pop("results")
        return answer

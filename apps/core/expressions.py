"""Query expressions Django lacks, for conditions the apps write once and both their selectors and
the search engine (which compiles them to SQL) apply."""

from django.db.models import BooleanField, Expression, F, QuerySet, Subquery


class CitesAny(Expression):
    """Whether an array field holds one of the ids a subquery selects. The ids are hashed once (`&&`
    would compare every pair); `IS TRUE` keeps the planner from a per-row join; the leading EXISTS skips
    the per-row work when the subquery selects nothing (the usual case)."""

    output_field = BooleanField()

    def __init__(self, array: str, ids: QuerySet):
        super().__init__()
        self.array, self.ids = F(array), Subquery(ids.order_by())

    def get_source_expressions(self):
        return [self.array, self.ids]

    def set_source_expressions(self, expressions):
        self.array, self.ids = expressions

    def as_sql(self, compiler, connection):
        array_sql, array_params = compiler.compile(self.array)
        ids_sql, ids_params = compiler.compile(self.ids)
        return (
            f"(EXISTS {ids_sql} AND EXISTS (SELECT 1 FROM unnest({array_sql}) AS cited(id) WHERE (cited.id IN {ids_sql}) IS TRUE))",
            [*ids_params, *array_params, *ids_params],
        )

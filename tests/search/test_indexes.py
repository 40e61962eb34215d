"""The fuzzy method's trigram index exists for every memory type, on exactly the expression it searches."""

import pytest
from django.db import connection

from apps.search.registry import SOURCES

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("memory_type", sorted(SOURCES))
def test_the_fuzzy_expression_has_a_trigram_index(memory_type):
    source = SOURCES[memory_type]
    table = source.model._meta.db_table
    with connection.cursor() as cursor:
        # With sequential scans priced out, the planner uses a trigram index only if one is
        # built on this very expression (an index on each column separately does not count).
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN SELECT t.id FROM {table} t WHERE %s <%% {source.fuzzy_expression}", ["zebrafish"])
        plan = "\n".join(line for (line,) in cursor.fetchall())
    assert "Bitmap Index Scan on" in plan and "_trgm_idx" in plan, plan

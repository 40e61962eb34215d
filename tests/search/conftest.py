import pytest
from django.db import connection

from apps.search.registry import SOURCES

# Both plans of the engine: the visible items read once ("scan"), and the GIN and HNSW indexes.
# The index plan commits its rows and starts from vacuumed tables: rolled-back rows of earlier
# tests stay in the HNSW graph until a vacuum, and a filtered approximate scan through
# thousands of dead entries may stop before it reaches the few live ones.
PLANS = [
    pytest.param("scan", id="scan"),
    pytest.param("indexes", id="indexes", marks=pytest.mark.django_db(transaction=True)),
]


@pytest.fixture
def use_plan(settings):
    def use(plan: str) -> None:
        settings.SEARCH_SCAN_MAX_ROWS = 20000 if plan == "scan" else 0
        if plan == "indexes":
            with connection.cursor() as cursor:
                for source in SOURCES.values():
                    cursor.execute(f"VACUUM {source.model._meta.db_table}")

    return use

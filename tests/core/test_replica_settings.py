"""DATABASE_REPLICA_URLS as Django databases: one alias per URL, read-only mirrors of `default`."""

import json
import os
import subprocess
import sys
from pathlib import Path

from apps.core.replicas import PrimaryWritesRouter, lsn_number

BASE_DIR = Path(__file__).resolve().parent.parent.parent


def databases_with(urls: str) -> dict:
    script = (
        "import json, django; django.setup(); from django.conf import settings;"
        "print(json.dumps({alias: {k: v for k, v in db.items() if k in ('HOST', 'PORT', 'NAME', 'TEST', 'OPTIONS')}"
        " for alias, db in settings.DATABASES.items()}, default=str))"
    )
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="memory_platform.settings", DATABASE_REPLICA_URLS=urls)
    result = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=BASE_DIR, capture_output=True, text=True, check=True
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_each_replica_url_is_an_alias_mirroring_default():
    databases = databases_with("postgres://reader@replica-a:5433/memory,postgres://reader@replica-b/memory")
    assert sorted(databases) == ["default", "replica_0", "replica_1"]
    assert (databases["replica_0"]["HOST"], str(databases["replica_0"]["PORT"])) == ("replica-a", "5433")
    assert databases["replica_1"]["HOST"] == "replica-b"
    assert all(databases[alias]["TEST"]["MIRROR"] == "default" for alias in ("replica_0", "replica_1"))
    # The same per-connection search settings as the primary: the engine's SQL relies on them.
    assert databases["replica_0"]["OPTIONS"]["options"] == databases["default"]["OPTIONS"]["options"]


def test_no_replica_urls_no_replica_aliases():
    assert sorted(databases_with("")) == ["default"]


def test_the_router_sends_every_write_and_migration_to_the_primary():
    router = PrimaryWritesRouter()
    assert router.db_for_write(object, instance=None) == "default"
    assert router.allow_migrate("replica_0", "conversations") is False
    assert router.allow_migrate("default", "conversations") is True
    assert router.db_for_read(object) is None  # reads go where the queryset says


def test_wal_positions_compare_as_numbers():
    assert lsn_number("0/140250B8") == 0x140250B8
    assert lsn_number("16/B374D848") > lsn_number("9/FFFFFFFF")
    assert lsn_number(None) is None

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.pipeline.models import ProcessHeartbeat
from apps.pipeline.services import heartbeat_record


@pytest.mark.django_db
def test_healthz_and_readyz(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json()["checks"] == {"database": "ok", "redis": "ok"}


@pytest.mark.django_db
def test_readyz_names_the_failed_dependency(client, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["failed"] == ["redis"]
    assert body["checks"]["database"] == "ok"


@pytest.mark.django_db
def test_schema_and_docs_are_served(client):
    schema = client.get("/api/schema/")
    assert schema.status_code == 200
    assert b"/api/v1/me" in schema.content
    assert client.get("/api/docs/").status_code == 200


@pytest.mark.django_db
def test_readyz_reports_beat_and_workers_by_the_age_of_their_heartbeats(client, settings):
    settings.PROCESS_STALE_AFTER_SECONDS = 60
    body = client.get("/readyz").json()
    assert body["machinery"]["beat"] == {"status": "never", "last_seen_at": None, "age_seconds": None, "alive": 0}
    assert body["machinery"]["worker"]["status"] == "never"

    now = timezone.now()
    heartbeat_record(kind="beat", hostname="beat-host", started_at=now)
    heartbeat_record(kind="worker", hostname="celery@a", started_at=now)
    heartbeat_record(kind="worker", hostname="celery@b", started_at=now)
    ProcessHeartbeat.objects.filter(hostname="celery@b").update(seen_at=now - timedelta(minutes=5))
    response = client.get("/readyz")
    machinery = response.json()["machinery"]
    assert machinery["beat"]["status"] == "ok" and machinery["beat"]["age_seconds"] < 5
    assert machinery["worker"]["status"] == "ok" and machinery["worker"]["alive"] == 1

    # A beat that stopped ticking is visible, but the web server stays ready.
    ProcessHeartbeat.objects.filter(kind="beat").update(seen_at=now - timedelta(seconds=61))
    response = client.get("/readyz")
    assert response.status_code == 200
    beat = response.json()["machinery"]["beat"]
    assert beat["status"] == "stale" and beat["alive"] == 0 and 60 < beat["age_seconds"] < 70


@pytest.mark.django_db
def test_a_heartbeat_is_one_row_per_process_name_updated_in_place():
    started = timezone.now() - timedelta(hours=1)
    heartbeat_record(kind="worker", hostname="celery@a", started_at=started)
    first = ProcessHeartbeat.objects.get().seen_at
    heartbeat_record(kind="worker", hostname="celery@a", started_at=started)
    row = ProcessHeartbeat.objects.get()
    assert row.seen_at > first and row.started_at == started

"""`manage.py heartbeat_check`: the healthcheck of worker and beat containers."""

from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from apps.pipeline.models import ProcessHeartbeat
from apps.pipeline.services import heartbeat_record

pytestmark = pytest.mark.django_db


def test_a_fresh_heartbeat_of_this_host_passes_and_a_stale_or_foreign_one_fails(settings):
    settings.PROCESS_STALE_AFTER_SECONDS = 60
    heartbeat_record(kind="worker", hostname="celery@box-1", started_at=timezone.now())
    heartbeat_record(kind="beat", hostname="box-1", started_at=timezone.now())

    call_command("heartbeat_check", "worker", "--host", "box-1")
    call_command("heartbeat_check", "beat", "--host", "box-1")
    with pytest.raises(CommandError, match="no recent worker heartbeat from box-2"):
        call_command("heartbeat_check", "worker", "--host", "box-2")

    ProcessHeartbeat.objects.update(seen_at=timezone.now() - timedelta(seconds=61))
    with pytest.raises(CommandError, match="no recent beat heartbeat"):
        call_command("heartbeat_check", "beat", "--host", "box-1")

"""verify_erasure: residual counts per table and Redis; every table that can hold a subject's data is checked."""

import json
from io import StringIO

import pytest
import redis
from django.apps import apps
from django.conf import settings
from django.core.management import CommandError, call_command

from apps.conversations.models import Message, Session
from apps.pipeline.services import task_execute
from apps.privacy.services.subjects import subject_resolve
from apps.privacy.services.verify import redis_scan, subject_checks
from apps.tenancy.models import Client, EndUser
from tests.conftest import api_for
from tests.privacy.conftest import ALICE

pytestmark = pytest.mark.django_db


def verify(*args) -> dict:
    out = StringIO()
    call_command("verify_erasure", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def test_the_command_reports_residuals_before_and_zero_after_an_erasure(world):
    org = world.organization.name
    before = verify("--user", ALICE, "--org", org)
    assert before["total"] > 0 and before["tables"]["conversations.Message"] > 0

    body = api_for(world.client_a).delete(f"/api/v1/users/{ALICE}/memories").json()
    task_execute(task_id=body["task_id"], worker="test")

    after = verify("--user", ALICE, "--org", org)
    assert after["total"] == 0 and set(after["tables"]) == set(before["tables"])
    assert after["redis"]["keys_scanned"] >= 0 and "error" not in after["redis"]
    # The same user id in another organisation was not touched.
    assert (
        verify("--user", ALICE, "--org", world.foreign_client.organization.name)["tables"]["conversations.Message"] == 1
    )


def test_the_command_prints_a_table_for_people(world):
    out = StringIO()
    call_command("verify_erasure", "--client", str(world.client_c.pk), "--no-redis", stdout=out)
    lines = {
        line.rsplit(None, 1)[0].strip(): line.rsplit(None, 1)[1] for line in out.getvalue().splitlines() if line.strip()
    }
    assert lines["tenancy.ClientAPIKey (not revoked)"] == "1" and lines["conversations.IngestRequest"] == "1"
    assert lines["residual total:"] != "0"


def test_the_command_refuses_unknown_subjects(world):
    with pytest.raises(CommandError):
        call_command("verify_erasure", "--user", ALICE, "--org", "no-such-org")
    with pytest.raises(CommandError):
        call_command("verify_erasure", "--client", "not-a-uuid")


def test_a_redis_entry_naming_the_subject_is_found():
    """Celery messages carry task ids; an entry naming a subject's row id would be reported."""
    connection = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    key = "privacy-test-probe"
    row_id = "3f1c2d4e-0000-4000-8000-000000000001"
    try:
        connection.rpush(key, json.dumps({"body": "", "headers": {"argsrepr": f"['{row_id}']"}, "args": [row_id]}))
        assert redis_scan({row_id})["matches"] == 1
        assert redis_scan({"3f1c2d4e-0000-4000-8000-000000000002"})["matches"] == 0
    finally:
        connection.delete(key)


def test_every_table_that_can_hold_a_subjects_data_is_checked(world):
    """A new model with a user, a session or a creating client fails this until erasure covers it."""
    checked = set()
    for kind, subject_id in (("user", ALICE), ("client", str(world.client_c.pk))):
        subject = subject_resolve(organization=world.organization, kind=kind, subject_id=subject_id)
        checked |= {label.split(" ")[0] for label, _ in subject_checks(subject)}
    holders = set()
    for model in apps.get_models():
        for field in model._meta.concrete_fields:
            related = getattr(field, "related_model", None)
            if related in (EndUser, Session, Message) or (related is Client and field.name == "created_by"):
                holders.add(model._meta.label)
    assert holders and holders <= checked, holders - checked

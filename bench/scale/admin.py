"""Admin benchmark: server time of the skills changelist and the review queue with 100,000 skills.

Skills are written with binary COPY (without vectors: the admin never reads them) into a
throwaway organisation of the development database, the table is analysed, and each page
is rendered in-process by Django's test client as a staff member of that organisation, so
the figures are server time only. Target: under 300 ms, with a bounded number of queries.
`python -m bench admin`.
"""

import json
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

from bench.common import Stopwatch, percentile, write_result

SKILLS = 100_000
REQUESTS = 20
TARGET_MS = 300


def _seed(organization, count: int) -> None:
    from django.db import connection

    columns = (
        "id, created_at, updated_at, organization_id, scope, name, description, instructions, triggers, examples,"
        " entry_type, status, version, action_signature, embedding_model"
    )
    statuses = ["active"] * 17 + ["pending_review"] * 2 + ["archived"]
    started = datetime.now(timezone.utc)
    with connection.cursor() as cursor:
        with cursor.cursor.copy(f"COPY skills_skill ({columns}) FROM STDIN") as copy:
            for n in range(count):
                moment = started - timedelta(seconds=n)
                copy.write_row(
                    (
                        str(uuid.uuid4()),
                        moment,
                        moment,
                        str(organization.pk),
                        f"scope-{n % 2}",
                        f"skill-{n}",
                        f"How to handle request kind {n % 977} for flights and bookings",
                        f"Step one for case {n}. Step two: confirm with the user. Step three: call the tool.",
                        json.dumps([f"case {n % 977}"]),
                        "[]",
                        "workflow",
                        statuses[n % len(statuses)],
                        1,
                        "{}",
                        "",
                    )
                )
    # What autovacuum does to a table this size on its own: statistics and the visibility map.
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE skills_skill")


def _time(client, url: str, requests: int) -> dict:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client.get(url)  # warm
    timings = []
    for _ in range(requests):
        with Stopwatch() as watch:
            response = client.get(url)
        timings.append(watch.ms)
        assert response.status_code == 200, response.status_code
    with CaptureQueriesContext(connection) as queries:
        client.get(url)
    return {
        "p50_ms": round(percentile(timings, 0.5), 1),
        "p95_ms": round(percentile(timings, 0.95), 1),
        "queries": len(queries),
    }


def run(output_dir: Path, *, skills: int = SKILLS) -> dict:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission
    from django.test import Client

    from apps.tenancy.models import Organization, StaffMembership
    from apps.tenancy.services import organization_create

    organization = organization_create(name=f"bench-admin-{uuid.uuid4().hex[:8]}")
    username = f"bench-staff-{uuid.uuid4().hex[:8]}"
    staff = get_user_model().objects.create_user(username, password=uuid.uuid4().hex, is_staff=True)
    try:
        StaffMembership.objects.create(user=staff, organization=organization)
        staff.user_permissions.add(*Permission.objects.filter(content_type__app_label="skills"))
        with Stopwatch() as seeding:
            _seed(organization, skills)
        client = Client(SERVER_NAME="localhost")
        client.force_login(staff)
        results = {
            "skills": skills,
            "seed_seconds": round(seeding.seconds, 1),
            "changelist": _time(client, "/admin/skills/skill/", REQUESTS),
            "review_queue": _time(client, "/admin/skills/skill/review/", REQUESTS),
            "target_ms": TARGET_MS,
        }
    finally:
        Organization.objects.filter(pk=organization.pk).delete()
        staff.delete()
    print(
        f"admin ({skills} skills): changelist p50 {results['changelist']['p50_ms']} ms "
        f"({results['changelist']['queries']} queries), review queue p50 {results['review_queue']['p50_ms']} ms "
        f"({results['review_queue']['queries']} queries); target < {TARGET_MS} ms"
    )
    write_result(output_dir, "admin", results)
    return results

from datetime import timedelta

from django.conf import settings
from django.db.models import Count, Max, Min, Q
from django.utils import timezone

from apps.pipeline.models import MemoryTask, ProcessHeartbeat
from apps.pipeline.registry import REQUESTER_ONLY


def task_list(*, client):
    """In its organisation: tasks in a scope it reads (and, with can_erase, scopeless ones), except
    requester-only types, and those its requests created or were answered with."""
    shared = Q(scope__in=client.read_scopes)
    if client.can_erase:
        shared |= Q(scope__isnull=True)
    visible = (
        (shared & ~Q(task_type__in=sorted(REQUESTER_ONLY)))
        | Q(client_id=client.pk)
        | Q(handed_to__contains=[client.pk])
    )
    return MemoryTask.objects.filter(visible, organization_id=client.organization_id)


def queue_status() -> dict:
    """The backlog, platform-wide, in one statement over the claim index."""
    now = timezone.now()
    due = Q(status__in=MemoryTask.CLAIMABLE_STATUSES, run_after__lte=now)
    counts = MemoryTask.objects.filter(status__in=MemoryTask.ACTIVE_STATUSES).aggregate(
        due=Count("pk", filter=due),
        oldest_due=Min("run_after", filter=due),
        scheduled=Count("pk", filter=Q(status__in=MemoryTask.CLAIMABLE_STATUSES, run_after__gt=now)),
        running=Count("pk", filter=Q(status=MemoryTask.Status.RUNNING)),
    )
    oldest = counts.pop("oldest_due")
    counts["oldest_due_age_seconds"] = round(max(0.0, (now - oldest).total_seconds()), 1) if oldest else None
    return counts


def machinery_status() -> dict:
    """How long ago beat ticked and a worker reported, each `ok`, `stale` or `never`, and how many are alive."""
    now = timezone.now()
    fresh_after = now - timedelta(seconds=settings.PROCESS_STALE_AFTER_SECONDS)
    rows = {
        row["kind"]: row
        for row in ProcessHeartbeat.objects.values("kind")
        .annotate(newest=Max("seen_at"), alive=Count("pk", filter=Q(seen_at__gte=fresh_after)))
        .order_by()
    }
    status = {}
    for kind in ProcessHeartbeat.Kind.values:
        row = rows.get(kind)
        if row is None:
            status[kind] = {"status": "never", "last_seen_at": None, "age_seconds": None, "alive": 0}
            continue
        age = max(0.0, (now - row["newest"]).total_seconds())
        status[kind] = {
            "status": "ok" if row["alive"] else "stale",
            "last_seen_at": row["newest"].isoformat(),
            "age_seconds": round(age, 1),
            "alive": row["alive"],
        }
    return status


def heartbeat_fresh(*, kind: str, host: str) -> bool:
    """Within PROCESS_STALE_AFTER_SECONDS; beat records the host name, a worker its node name "celery@host"."""
    fresh_after = timezone.now() - timedelta(seconds=settings.PROCESS_STALE_AFTER_SECONDS)
    return ProcessHeartbeat.objects.filter(
        Q(hostname=host) | Q(hostname__endswith=f"@{host}"), kind=kind, seen_at__gte=fresh_after
    ).exists()

"""Liveness and readiness probes: the database, the broker, and beat and the workers beside them."""

from django.conf import settings
from django.db import connection
from django.http import JsonResponse

from apps.core.redis_clients import redis_client
from apps.pipeline.selectors import machinery_status, queue_status
from apps.search.selectors import embedding_model_problem
from memory_platform.supervisor import supervisor_status


def healthz(request):
    return JsonResponse({"status": "ok"})


def _database_check() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return "ok"


def _redis_check() -> str:
    client = redis_client(settings.CELERY_BROKER_URL, socket_connect_timeout=1, socket_timeout=1)
    try:
        client.ping()
    finally:
        client.close()
    return "ok"


def readyz(request):
    """Ready when the database and the broker answer. Beat and workers are reported beside the
    checks (age of their last heartbeat) without deciding readiness: a web server can serve while
    a worker restarts, but an operator must see a deploy that has no beat or no worker. So are
    vectors made by another embedding model than the configured one (`embeddings`): searches still
    answer, by keywords for those items, until `manage.py reembed` moves them. `queue` is the
    backlog: tasks due now and the age of the oldest, tasks waiting for their time, tasks running."""
    checks = {}
    for name, check in (("database", _database_check), ("redis", _redis_check)):
        try:
            checks[name] = check()
        except Exception as exc:  # any failure means "not ready"; the message says which
            checks[name] = f"unavailable: {type(exc).__name__}: {exc}"
    ready = all(value == "ok" for value in checks.values())
    failed = [name for name, value in checks.items() if value != "ok"]
    body = {"status": "ready" if ready else "unavailable", "checks": checks}
    if failed:
        body["failed"] = failed
    if checks["database"] == "ok":
        body["machinery"] = machinery_status()
        body["queue"] = queue_status()
        body["embeddings"] = embedding_model_problem() or "ok"
    supervised = supervisor_status()
    if supervised is not None:
        body["processes"] = supervised  # under `runplatform`: each child's restarts
    return JsonResponse(body, status=200 if ready else 503)

"""Verification of an erasure: what is left of a subject, per table and in Redis.

The same checks give the admin's preview ("what will be removed") before an erasure and the
residual after it. Redis holds only Celery's messages and results, which carry MemoryTask ids
and never memory text; the scan decodes every entry and reports any that names the subject.
"""

import base64
import json

import redis
from django.conf import settings
from django.db.models import QuerySet

from apps.privacy.services.subjects import USER, Subject
from apps.providers.models import LLMUsage

REDIS_MAX_ENTRIES = 50_000


def subject_checks(subject: Subject) -> list[tuple[str, QuerySet]]:
    """(table, queryset of what is still the subject's) for every table that can hold their data."""
    access = (
        [("tenancy.EndUser", subject.end_users())]
        if subject.kind == USER
        else [("tenancy.ClientAPIKey (not revoked)", subject.active_api_keys()), ("tenancy.Client (active)", subject.active_client())]
    )
    skills = [
        ("skills.SkillExperience", subject.experiences()),
        ("skills.SkillVersion.experiences", subject.lineage_links()),
    ]
    if subject.kind == USER:
        skills += [("skills.Skill", subject.own_skills()), ("skills.SkillVersion", subject.named_skill_versions())]
    return [
        *access,
        ("conversations.Session", subject.sessions()),
        ("conversations.Message", subject.messages()),
        ("conversations.IngestRequest", subject.ingest_requests()),
        *skills,
        *subject.memory_querysets(),
        ("profiles.Entity", subject.entities()),
        ("profiles.Profile", subject.profiles()),
        ("profiles.Mention", subject.mentions()),
        ("profiles.ProfileSource", subject.profile_sources()),
        ("profiles.ProfileRevision", subject.quoting_revisions()),
        ("pipeline.MemoryTask", subject.tasks()),
        ("pipeline.MemoryTask (orphaned references)", subject.orphaned_tasks()),
        ("providers.LLMUsage", LLMUsage.objects.filter(task_id__in=subject.tasks().values("pk"))),
    ]


def table_counts(subject: Subject) -> dict[str, int]:
    return {label: queryset.count() for label, queryset in subject_checks(subject)}


def subject_identifiers(subject: Subject) -> set[str]:
    """Row ids only: the platform puts ids, never a caller's user_id, into Celery messages (and a
    user_id such as "celery" would match Redis' own bookkeeping)."""
    identifiers = set()
    for row in (subject.end_user, subject.client):
        if row is not None:
            identifiers.add(str(row.pk))
    identifiers.update(str(pk) for pk in subject.sessions().values_list("pk", flat=True))
    identifiers.update(str(pk) for pk in subject.tasks().values_list("pk", flat=True))
    return identifiers


def _leaves(value):
    """String leaves of a Redis value, decoding JSON and kombu's base64 message bodies on the way."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        yield value
        stripped = value.strip()
        if stripped[:1] in ("{", "["):
            try:
                yield from _leaves(json.loads(stripped))
            except ValueError:
                pass
    elif isinstance(value, dict):
        body = value.get("body")
        if isinstance(body, str) and (value.get("properties") or {}).get("body_encoding") == "base64":
            try:
                yield from _leaves(base64.b64decode(body))
            except ValueError:
                pass
        for key, item in value.items():
            yield str(key)
            if key != "body" or not isinstance(body, str):
                yield from _leaves(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _leaves(item)


def _values(connection, key) -> list:
    kind = connection.type(key)
    if kind == b"list":
        return connection.lrange(key, 0, REDIS_MAX_ENTRIES)
    if kind == b"hash":
        return connection.hvals(key)
    if kind == b"string":
        return [connection.get(key)]
    if kind == b"set":
        return list(connection.smembers(key))
    if kind == b"zset":
        return connection.zrange(key, 0, REDIS_MAX_ENTRIES)
    return []


def redis_scan(identifiers: set[str]) -> dict:
    """Entries of the broker and result databases that name one of `identifiers`."""
    urls = list(dict.fromkeys([settings.CELERY_BROKER_URL, settings.CELERY_RESULT_BACKEND]))
    report = {"keys_scanned": 0, "entries_scanned": 0, "matches": 0}
    for url in urls:
        if not url.startswith(("redis://", "rediss://", "unix://")):
            continue
        connection = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=5)
        try:
            for key in connection.scan_iter(count=1000):
                report["keys_scanned"] += 1
                if key.decode("utf-8", "replace") in identifiers:
                    report["matches"] += 1
                for value in _values(connection, key):
                    report["entries_scanned"] += 1
                    if any(leaf in identifiers for leaf in _leaves(value)):
                        report["matches"] += 1
                    if report["entries_scanned"] >= REDIS_MAX_ENTRIES:
                        report["truncated"] = True
                        return report
        except redis.RedisError as exc:
            report["error"] = f"{type(exc).__name__}: Redis at {url.split('@')[-1]} could not be scanned"
        finally:
            connection.close()
    return report


def subject_verify(*, subject: Subject, include_redis: bool = True) -> dict:
    """{"tables": {table: residual rows}, "redis": {...}, "total": n}; total 0 means nothing is left."""
    identifiers = subject_identifiers(subject)
    tables = table_counts(subject)
    result = {"tables": tables, "total": sum(tables.values())}
    if include_redis:
        result["redis"] = redis_scan(identifiers)
        result["total"] += result["redis"]["matches"]
    return result

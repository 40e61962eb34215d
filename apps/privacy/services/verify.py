"""Verification of an erasure: what is left of a subject, per table, as text anywhere, and in Redis.
By provenance with the purge's own querysets; by a fingerprint of the subject's words, taken before the purge."""

import base64
import json
import re
from collections import Counter

import redis
from django.apps import apps
from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import QuerySet

from apps.conversations.models import Message
from apps.core.redis_clients import redis_address, redis_client
from apps.privacy.services.subjects import USER, Subject
from apps.providers.models import LLMUsage

REDIS_MAX_ENTRIES = 50_000


def subject_checks(subject: Subject) -> list[tuple[str, QuerySet]]:
    access = (
        [("tenancy.EndUser", subject.end_users())]
        if subject.kind == USER
        else [
            ("tenancy.ClientAPIKey (not revoked)", subject.active_api_keys()),
            ("tenancy.Client (active)", subject.active_client()),
        ]
    )
    skills = [
        ("skills.SkillExperience", subject.experiences()),
        ("skills.SkillVersion.experiences", subject.lineage_links()),
        ("skills.SkillUse", subject.skill_uses()),
        ("skills.SkillFeedback", subject.skill_feedback()),
        ("skills.SkillWithheld", subject.skills_withheld()),
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
        ("profiles.TopicState", subject.topic_states()),
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
    """Row ids only: Celery messages carry ids, and a user_id such as "celery" would match Redis' bookkeeping."""
    identifiers = {str(row.pk) for row in (subject.end_user, subject.client) if row is not None}
    identifiers.update(str(pk) for pk in subject.sessions().values_list("pk", flat=True))
    identifiers.update(str(pk) for pk in subject.tasks().values_list("pk", flat=True))
    return identifiers


def _leaves(value):
    """Decoding JSON and kombu's base64 message bodies on the way."""
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


# The values of a key, by its type.
REDIS_READERS = {
    b"list": lambda connection, key: connection.lrange(key, 0, REDIS_MAX_ENTRIES),
    b"hash": lambda connection, key: connection.hvals(key),
    b"string": lambda connection, key: [connection.get(key)],
    b"set": lambda connection, key: list(connection.smembers(key)),
    b"zset": lambda connection, key: connection.zrange(key, 0, REDIS_MAX_ENTRIES),
}


def redis_scan(identifiers: set[str]) -> dict:
    # Redis holds only Celery's messages and results, which carry ids and never memory text.
    report = {"keys_scanned": 0, "entries_scanned": 0, "matches": 0}
    for url in dict.fromkeys([settings.CELERY_BROKER_URL, settings.CELERY_RESULT_BACKEND]):
        if not url.startswith(("redis://", "rediss://", "unix://", "sentinel://")):
            continue
        connection = redis_client(url, socket_connect_timeout=2, socket_timeout=5)
        try:
            for key in connection.scan_iter(count=1000):
                report["keys_scanned"] += 1
                if key.decode("utf-8", "replace") in identifiers:
                    report["matches"] += 1
                read = REDIS_READERS.get(connection.type(key))
                for value in read(connection, key) if read else ():
                    report["entries_scanned"] += 1
                    if any(leaf in identifiers for leaf in _leaves(value)):
                        report["matches"] += 1
                    if report["entries_scanned"] >= REDIS_MAX_ENTRIES:
                        report["truncated"] = True
                        return report
        except redis.RedisError as exc:
            report["error"] = f"{type(exc).__name__}: Redis at {redis_address(url)} could not be scanned"
        finally:
            connection.close()
    return report


SHINGLE_WORDS = 5
_WORD = re.compile(r"\w+")
NO_DERIVED_TEXT_APPS = ("tenancy", "privacy")
# A turn's own columns are its writer's words; of a turn only the neighbours' text it stores is derived.
DERIVED_COLUMNS_ONLY = {Message: ("context",)}


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def subject_fingerprint(subject: Subject) -> tuple[set[str], list]:
    """(fingerprint of the subject's most recent turns, ids of their sessions). Its runs lie side by side, not
    overlapping: any verbatim copy of 2 × SHINGLE_WORDS − 1 words contains one."""
    turns = subject.messages().order_by("-occurred_at")[: settings.ERASURE_SCAN_MAX_TURNS]
    needles = set()
    for text in turns.values_list("content", flat=True).iterator(chunk_size=2000):
        words = _words(text or "")
        needles.update(
            " ".join(words[i : i + SHINGLE_WORDS]) for i in range(0, len(words) - SHINGLE_WORDS + 1, SHINGLE_WORDS)
        )
    return needles, list(subject.messages().order_by().values_list("session_id", flat=True).distinct())


def _text_fields(model) -> list[str]:
    names = []
    for field in model._meta.concrete_fields:
        text = isinstance(field, (models.CharField, models.TextField)) and not field.choices
        array = isinstance(field, ArrayField) and isinstance(field.base_field, (models.CharField, models.TextField))
        if text or array or isinstance(field, models.JSONField):
            names.append(field.name)
    return [name for name in names if name in DERIVED_COLUMNS_ONLY.get(model, names)]


def _has_organization(model) -> bool:
    return any(field.name == "organization" for field in model._meta.concrete_fields)


def _organization_path(model) -> str | None:
    if _has_organization(model):
        return "organization"
    for field in model._meta.concrete_fields:
        if field.many_to_one and _has_organization(field.related_model):
            return f"{field.name}__organization"
    return None


def derived_text_tables() -> list[tuple]:
    """(model, text columns, lookup to the organisation); found from the models, so a new table is covered."""
    tables = []
    for model in apps.get_models():
        if not model.__module__.startswith("apps.") or model._meta.app_label in NO_DERIVED_TEXT_APPS:
            continue
        columns, path = _text_fields(model), _organization_path(model)
        if columns and path:
            tables.append((model, columns, path))
    return tables


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _said_by_others(*, organization, needle: str, exclude_turns: QuerySet) -> bool:
    """A run of words another party's turn also holds is not the subject's alone."""
    pattern = r"\W+".join(rf"\m{word}\M" for word in needle.split())
    return (
        Message.objects.filter(organization=organization, content__iregex=pattern)
        .exclude(pk__in=exclude_turns.values("pk"))
        .exists()
    )


def text_residue(*, organization, needles: set[str], sessions: list, exclude_turns: QuerySet) -> dict:
    """{"table.column": rows holding a run of the subject's words}; turns are read only in `sessions`."""
    found: Counter = Counter()
    confirmed: dict[str, bool] = {}
    if not needles:
        return {}
    for model, columns, path in derived_text_tables():
        rows = model.objects.filter(**{path: organization})
        if model is Message:
            rows = rows.filter(session_id__in=sessions).exclude(pk__in=exclude_turns.values("pk"))
        for values in rows.values_list(*columns).iterator(chunk_size=2000):
            for column, value in zip(columns, values):
                words = [word for text in _strings(value) for word in [*_words(text), "\x00"]]
                hits = {" ".join(words[i : i + SHINGLE_WORDS]) for i in range(len(words) - SHINGLE_WORDS + 1)} & needles
                for needle in hits:
                    if needle not in confirmed:
                        confirmed[needle] = not _said_by_others(
                            organization=organization, needle=needle, exclude_turns=exclude_turns
                        )
                if any(confirmed[needle] for needle in hits):
                    found[f"{model._meta.label}.{column}"] += 1
    return dict(found)


def subject_verify(*, subject: Subject, include_redis: bool = True, fingerprint: tuple | None = None) -> dict:
    """A total of 0 means nothing is left; `fingerprint` defaults to the subject's turns as they are now."""
    tables = table_counts(subject)
    needles, sessions = fingerprint if fingerprint is not None else subject_fingerprint(subject)
    text = text_residue(
        organization=subject.organization, needles=needles, sessions=sessions, exclude_turns=subject.messages()
    )
    result = {
        "tables": tables,
        "text": {"fingerprint": len(needles), "tables": text},
        "total": sum(tables.values()) + sum(text.values()),
    }
    if include_redis:
        result["redis"] = redis_scan(subject_identifiers(subject))
        result["total"] += result["redis"]["matches"]
    return result

"""Erasure and deletion by provenance (issue 26): what is left of the words that went, and whose rows
went with them.

For each kind of erasure or deletion, a fresh organisation where two clients of one scope write the
same conversation and task sessions, with one client's distinctive words planted in every
derivation the platform has (harness/provenance_world.py: experiences, a shared skill and its
versions, memories and their history, entities and profile pages, neighbours' stored context and
search vectors, a task's result). After the erasure or deletion every text-like column of every
table (text, JSON, arrays, search vectors) is scanned for the words. Reported per kind: the tables (and
columns) holding them before and after, and how many of the other parties' turns were deleted.

`admin_delete` is a curator removing the person in the admin (issue 54): the page offers no plain Delete,
its "Erase this person" runs the erasure; its report says whether Delete was offered and what the
erasure's own verification (the fingerprint of the person's words over every table) found after.

Retention is the one kind that keeps what was learned by design (memories, skills, experiences
outlive their transcripts); for it only the transcript-derived columns are counted.
`python -m bench privacy_erasure` (a row of `python -m bench privacy`).
"""

import random
import string
import uuid

from bench.common import Stopwatch, machine, measured_at, private_broker, write_result

KINDS = (
    "client_erasure",
    "user_erasure",
    "admin_delete",
    "turn_delete_rest",
    "turn_delete_mcp",
    "session_delete",
    "retention",
)
TRANSCRIPT_COLUMNS = (
    "conversations.Message.content",
    "conversations.Message.context",
    "conversations.Message.search_vector",
)


def _word(prefix: str) -> str:
    """A word no earlier run left in the database (the scan is over every organisation), ending so
    that the English stemmer keeps it whole in the search vectors."""
    return prefix + "".join(random.choices(string.ascii_lowercase, k=6)) + "zk"


def _other_turns(world, kind: str, target) -> set:
    from apps.conversations.models import Message

    turns = Message.objects.filter(organization=world.organization)
    if kind == "client_erasure":
        turns = turns.exclude(created_by=world.two)
    elif kind in ("user_erasure", "admin_delete"):
        turns = turns.exclude(end_user__user_id=target)
    elif kind == "session_delete":
        turns = turns.exclude(session=target)
    else:
        turns = turns.exclude(pk=target.pk)
    return set(turns.values_list("pk", "content"))


def _admin_delete(world, user_id: str) -> dict:
    """As staff of the organisation in the admin: the person's page, then its erase link, confirmed."""
    from django.contrib.auth.models import Permission, User
    from django.test import Client as Browser
    from django.urls import reverse

    from apps.pipeline.services import task_execute
    from apps.privacy.models import ErasureRequest
    from apps.privacy.services.subjects import subject_resolve
    from apps.privacy.services.verify import subject_fingerprint, subject_verify
    from apps.tenancy.models import EndUser, StaffMembership

    staff = User.objects.create_user(f"bench-dpo-{uuid.uuid4().hex[:8]}", is_staff=True)
    try:
        staff.user_permissions.set(Permission.objects.all())
        StaffMembership.objects.create(user=staff, organization=world.organization)
        browser = Browser(SERVER_NAME="localhost")
        browser.force_login(staff)
        person = EndUser.objects.get(organization=world.organization, user_id=user_id)
        page = browser.get(reverse("admin:tenancy_enduser_change", args=[person.pk])).content.decode()
        delete_url, erase_url = (
            reverse("admin:tenancy_enduser_delete", args=[person.pk]),
            reverse("admin:privacy_erase_user", args=[person.pk]),
        )
        subject = subject_resolve(organization=world.organization, kind="user", subject_id=user_id)
        fingerprint = subject_fingerprint(subject)
        report = {
            "delete_offered": delete_url in page or browser.get(delete_url).status_code == 200,
            "erase_link_on_page": erase_url in page,
        }
        browser.post(erase_url)
        erasure = ErasureRequest.objects.get(organization=world.organization, subject_id=user_id)
        task_execute(task_id=erasure.task_id, worker="bench")
        erasure.refresh_from_db()
        subject = subject_resolve(organization=world.organization, kind="user", subject_id=user_id)
        return {
            **report,
            "status": erasure.status,
            "verification_total": (erasure.residual or {}).get("total"),
            "fingerprint_runs": len(fingerprint[0]),
            "residual_rows_with_their_words_after": subject_verify(subject=subject, fingerprint=fingerprint)["total"],
        }
    finally:
        staff.delete()


def _act(world, kind: str, target) -> dict:
    """Runs the erasure or deletion as a caller would; returns what its own report says."""
    from datetime import timedelta

    from django.conf import settings
    from django.test.utils import override_settings
    from django.utils import timezone
    from rest_framework.test import APIClient

    from apps.conversations.models import Message, Session
    from apps.pipeline.services import task_execute
    from apps.privacy.models import ErasureRequest

    if kind == "admin_delete":
        return _admin_delete(world, target)
    api = APIClient(SERVER_NAME="localhost")
    api.credentials(HTTP_AUTHORIZATION=f"Api-Key {world.one_key}")
    if kind in ("client_erasure", "user_erasure"):
        url = (
            f"/api/v1/clients/{world.two.pk}/memories"
            if kind == "client_erasure"
            else f"/api/v1/users/{target}/memories"
        )
        body = api.delete(url).json()
        task_execute(task_id=body["task_id"], worker="bench")
        erasure = ErasureRequest.objects.get(pk=body["erasure_id"])
        return {
            "status": erasure.status,
            "verification_total": (erasure.residual or {}).get("total"),
            "fingerprint_runs": ((erasure.residual or {}).get("text") or {}).get("fingerprint"),
        }
    if kind == "turn_delete_rest":
        api.credentials(HTTP_AUTHORIZATION=f"Api-Key {world.two_key}")
        return {"status": api.delete(f"/api/v1/memory/message/{target.pk}").status_code}
    if kind == "turn_delete_mcp":
        from asgiref.sync import async_to_sync
        from memory_platform_client.contract import TOOLS_BY_NAME

        from apps.mcp_server.backend import PlatformBackend

        # The tool's backend call, run on this thread (no executor), as the MCP tool makes it.
        arguments = {"memory_type": "message", "memory_id": str(target.pk)}
        async_to_sync(PlatformBackend(client=world.two).call)(TOOLS_BY_NAME["delete_memory"], arguments)
        return {"status": "deleted"}
    if kind == "session_delete":
        from apps.privacy.services.provenance import session_delete

        return {"counts": {table: n for table, n in session_delete(session=target).items() if n}}
    from apps.privacy.services.retention import retention_prune

    # Retention: the turn with the word was learned from long ago, the rest of its session recently.
    days = max(1, settings.CONVERSATION_RETENTION_DAYS)
    long_ago = timezone.now() - timedelta(days=days + 5)
    Session.objects.filter(pk=target.session_id).update(extracted_at=long_ago)
    Message.objects.filter(session_id=target.session_id).update(learned_at=timezone.now())
    Message.objects.filter(pk=target.pk).update(learned_at=long_ago)
    with override_settings(CONVERSATION_RETENTION_DAYS=days):
        return {"pruned_turns": retention_prune()["messages"]}


def _scenario(kind: str) -> dict:
    from django.test.utils import override_settings

    from apps.conversations.models import Message, Session
    from apps.search.engine import search
    from apps.search.registry import SOURCES
    from apps.tenancy.services import client_create, organization_create
    from harness.provenance_world import URSULA, build, residue

    organization = organization_create(name=f"bench-privacy-{uuid.uuid4().hex[:12]}")
    try:
        # SKILL_SHARE_MIN_USERS=1: every planted lesson reaches the shared skill (trust would hold some back).
        with override_settings(
            LLM_PROVIDER="rules", SKILL_REVIEW_MODE="auto", SKILL_SHARE_MIN_USERS=1, EXTRACTION_DEBOUNCE_SECONDS=0
        ):
            one, one_key = client_create(organization=organization, name="one", write_scope="default", can_erase=True)
            two, two_key = client_create(organization=organization, name="two", write_scope="default")
            world = build(one, two, word=_word("vorpal"), turn_word=_word("quill"))
            world.one_key, world.two_key = one_key, two_key
            turn = Message.objects.get(organization=organization, content__contains=world.turn_word)
            target = {
                "user_erasure": URSULA,
                "admin_delete": URSULA,
                "session_delete": Session.objects.get(pk=turn.session_id),
            }.get(kind, turn)
            watched = world.word if kind in ("client_erasure", "user_erasure", "admin_delete") else world.turn_word
            only = TRANSCRIPT_COLUMNS if kind == "retention" else None
            before = residue(watched, only=only)
            others = _other_turns(world, kind, target)
            with Stopwatch() as watch:
                report = _act(world, kind, target)
            after = residue(watched, only=only)
            left = _other_turns(world, kind, target)
            # A keyword search as the client that stays, for the word that went, over every memory type.
            # (Retention keeps learned memory by design: only the transcript is searched after it.)
            keyword_hits = len(
                search(
                    reader=one.reader,
                    query=watched,
                    memory_types=["message"] if kind == "retention" else list(SOURCES),
                    method="bm25",
                    limit=50,
                    filters={},
                )
            )
    finally:
        organization.delete()
    return {
        "columns_with_the_words_before": len(before),
        "columns_with_the_words_after": len(after),
        "tables_with_the_words_before": len({label.rsplit(".", 1)[0] for label in before}),
        "tables_with_the_words_after": len({label.rsplit(".", 1)[0] for label in after}),
        "before": sorted(before),
        "residue_after": after,
        "other_parties_turns": len(others),
        "other_parties_turns_deleted": len(others - left),
        "keyword_search_hits_for_the_word_after": keyword_hits,
        "seconds": round(watch.seconds, 3),
        "report": report,
    }


def run(output_dir, *, kinds=KINDS, log=print) -> dict:
    results = {}
    with private_broker():  # the platform publishes on commit; nothing of this run reaches a shared broker
        for kind in kinds:
            results[kind] = _scenario(kind)
            figures = results[kind]
            log(
                f"privacy_erasure {kind}: tables (columns) with the words {figures['tables_with_the_words_before']} "
                f"({figures['columns_with_the_words_before']}) before, {figures['tables_with_the_words_after']} "
                f"({figures['columns_with_the_words_after']}) after; other parties' turns deleted "
                f"{figures['other_parties_turns_deleted']} of {figures['other_parties_turns']}; keyword search hits for the word "
                f"afterwards {figures['keyword_search_hits_for_the_word_after']}"
            )
    result = {
        "benchmark": "privacy_erasure",
        "kinds": results,
        "all_clean": all(
            r["columns_with_the_words_after"] == 0 and r["other_parties_turns_deleted"] == 0 for r in results.values()
        ),
        "machine": machine(),
        "measured_at": measured_at(),
    }
    write_result(output_dir, "privacy_erasure", result)
    return result

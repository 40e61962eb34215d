"""What a search reads of each memory type is what the owning app's selectors read (SearchSource.visible,
compiled into the engine's SQL), and a session whose delete was accepted is gone from search and
context from its 202 on, before its purge runs."""

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db.models import Q
from django.utils import timezone

from apps.conversations.models import Message, Session
from apps.conversations.selectors import session_list, session_messages
from apps.memories.selectors import episodic_memory_list, memory_list, semantic_memory_list
from apps.pipeline.models import MemoryTask
from apps.profiles.models import Profile
from apps.profiles.selectors import profile_list
from apps.search.engine import search
from apps.search.engine.scoping import visibility_sql, where_sql
from apps.search.registry import SOURCES, SearchSource
from apps.skills.models import Skill, SkillExperience
from apps.skills.selectors import experience_list, skill_list
from apps.tenancy.models import EndUser
from tests.conftest import api_for
from tests.factories import ClientFactory
from tests.memories.makers import episodic, semantic
from tests.profiles.conftest import run_tasks  # noqa: F401  (fixture)
from tests.search.conftest import PLANS
from tests.search.makers import MAKERS

pytestmark = pytest.mark.django_db

TEXT = "zebrafish aquarium"


def _turns(client, add_messages, run_tasks, user_id, session_id, texts):  # noqa: F811
    add_messages(
        client, user_id=user_id, session_id=session_id, messages=[{"role": "user", "content": t} for t in texts]
    )
    run_tasks("embed_messages")
    return list(Message.objects.filter(session__session_id=session_id, session__end_user__user_id=user_id))


def _world(client, add_messages, run_tasks):  # noqa: F811
    """Items of every type for alice and bob in `client`'s scope, beside items the reader must not see:
    another scope's, another organisation's, a soft-deleted memory, skills not served to alice or not
    active, pages not active, and a session of alice's whose delete was accepted with what cites it."""
    organization = client.organization
    other_scope = ClientFactory(organization=organization, write_scope="secret")
    other_organization = ClientFactory(write_scope=client.write_scope)
    for owner in (client, other_scope, other_organization):
        for user_id in ("alice", "bob"):
            for memory_type, make in MAKERS.items():
                if memory_type != "procedural":
                    make(owner, user_id, f"{TEXT} {memory_type} of {user_id} by {owner.name}", add_messages)
    scope = client.write_scope
    (kept_turn,) = _turns(client, add_messages, run_tasks, "alice", "kept", [f"{TEXT} kept turn"])
    doomed = _turns(client, add_messages, run_tasks, "alice", "doomed", [f"{TEXT} doomed one", f"{TEXT} doomed two"])
    hidden = {
        "message": {turn.pk for turn in doomed},
        "semantic": {
            semantic(organization, scope, "alice", "Al", f"{TEXT} from doomed", source_message_ids=[doomed[0].pk]).pk,
            semantic(
                organization, scope, "alice", "Al", f"{TEXT} from both", source_message_ids=[kept_turn.pk, doomed[1].pk]
            ).pk,
            semantic(organization, scope, "alice", "Al", f"{TEXT} merged away", deleted_at=timezone.now()).pk,
        },
        "episodic": {
            episodic(organization, scope, "alice", f"{TEXT} doomed event", source_message_ids=[doomed[0].pk]).pk
        },
    }
    semantic(organization, scope, "alice", "Al", f"{TEXT} from kept", source_message_ids=[kept_turn.pk])
    of_session = MAKERS["experience"](client, "alice", f"{TEXT} lesson of doomed")
    SkillExperience.objects.filter(pk=of_session.pk).update(session=Session.objects.get(session_id="doomed"))
    citing = MAKERS["experience"](client, "alice", f"{TEXT} lesson citing doomed")
    SkillExperience.objects.filter(pk=citing.pk).update(source_message_ids=[doomed[1].pk])
    hidden["experience"] = {of_session.pk, citing.pk}

    alice, bob = (EndUser.objects.get(organization=organization, user_id=u) for u in ("alice", "bob"))
    skills = {}
    for name, fields in {
        "shared": {"shared": True},
        "alices": {"end_user": alice},
        "taught-by-alice": {"supporters": [alice.pk]},
        "bobs": {"end_user": bob},
        "archived": {"shared": True, "status": Skill.Status.ARCHIVED},
        "in-review": {"shared": True, "status": Skill.Status.PENDING_REVIEW},
    }.items():
        skill = MAKERS["procedural"](client, "alice", f"{TEXT} {name}")
        Skill.objects.filter(pk=skill.pk).update(**{"shared": False, **fields})
        skills[name] = skill.pk
    MAKERS["procedural"](other_scope, "alice", f"{TEXT} other scope")
    hidden["procedural"] = {skills["bobs"], skills["archived"], skills["in-review"]}
    archived = MAKERS["profile"](client, "alice", f"{TEXT} archived page")
    Profile.objects.filter(pk=archived.pk).update(status=Profile.Status.ARCHIVED)
    hidden["profile"] = {archived.pk}

    response = api_for(client).delete("/api/v1/sessions/doomed/?user_id=alice")
    assert response.status_code == 202, response.content
    assert MemoryTask.objects.get(pk=response.json()["task_id"]).status == "queued"
    return hidden


def _selected(memory_type: str, reader, user_id: str | None) -> set:
    """The ids the app's own selectors give the reader (those its endpoints read)."""
    user = {"user_id": user_id} if user_id else {}
    if memory_type == "message":
        return {
            m.pk for session in session_list(reader=reader, filters=user) for m in session_messages(session=session)
        }
    if memory_type in ("episodic", "semantic"):
        if user_id:
            return set(memory_list(reader=reader, memory_type=memory_type, filters=user).values_list("pk", flat=True))
        readable = (episodic_memory_list if memory_type == "episodic" else semantic_memory_list)(reader=reader)
        return set(readable.filter(deleted_at__isnull=True).values_list("pk", flat=True))
    if memory_type == "procedural":
        served = skill_list(reader=reader, filters={**user, "status": Skill.Status.ACTIVE})
        if not user_id:  # a search naming no user is served the shared skills only (docs/decisions.md)
            served = served.filter(shared=True, end_user__isnull=True)
        return set(served.values_list("pk", flat=True))
    if memory_type == "experience":
        return set(experience_list(reader=reader, filters=user).values_list("pk", flat=True))
    kind = Profile.Kind.PERSON if memory_type == "profile" else Profile.Kind.TOPIC
    return set(profile_list(reader=reader, filters={**user, "kind": kind}).values_list("pk", flat=True))


@pytest.mark.parametrize("plan", PLANS)
def test_search_reads_what_the_selectors_read(plan, use_plan, client_a, add_messages, run_tasks):  # noqa: F811
    hidden = _world(client_a, add_messages, run_tasks)
    use_plan(plan)
    reader = client_a.reader
    for memory_type in SOURCES:
        for user_id in ("alice", None):
            expected = _selected(memory_type, reader, user_id)
            # The world can tell the two apart: each type has items here that the reader must not see.
            stored = set(SOURCES[memory_type].model.objects.values_list("pk", flat=True))
            assert expected and stored - expected, memory_type
            assert not expected & hidden.get(memory_type, set()), memory_type
            # Twice each: on the index plan an owner's first search scans and finds more than the
            # limit, so the second goes through the indexes.
            for query, method in [("", None), ("", None), (TEXT, "bm25"), (TEXT, "bm25"), (TEXT, "fuzzy")]:
                hits = search(
                    reader=reader,
                    query=query,
                    memory_types=[memory_type],
                    method=method,
                    limit=500,
                    filters={"user_id": user_id} if user_id else {},
                )
                found = {hit.instance.pk for hit in hits}
                assert found == expected, (memory_type, user_id, query, method, found ^ expected)


def test_a_session_accepted_for_deletion_is_gone_from_search_and_context(
    api,
    client_a,
    add_messages,
    run_tasks,  # noqa: F811
):
    doomed = _turns(client_a, add_messages, run_tasks, "caroline", "chat-1", [f"I keep a {TEXT} at home"])
    (kept,) = _turns(client_a, add_messages, run_tasks, "caroline", "chat-2", [f"My {TEXT} needs a heater"])
    organization, scope = client_a.organization, client_a.write_scope
    fact = semantic(organization, scope, "caroline", "Caroline", f"keeps a {TEXT}", source_message_ids=[doomed[0].pk])
    event = episodic(organization, scope, "caroline", f"Caroline set up a {TEXT}", source_message_ids=[doomed[0].pk])
    lesson = MAKERS["experience"](client_a, "caroline", f"clean the {TEXT} weekly")
    SkillExperience.objects.filter(pk=lesson.pk).update(session=doomed[0].session)
    still = semantic(organization, scope, "caroline", "Caroline", f"heats her {TEXT}", source_message_ids=[kept.pk])
    gone = {doomed[0].pk, fact.pk, event.pk, lesson.pk}

    def searched(**body) -> set:
        response = api.post("/api/v1/memory/search", {"query": TEXT, "limit": 50, **body}, format="json")
        assert response.status_code == 200, response.content
        return {item["id"] for item in response.json()["results"]}

    def context_items() -> set:
        response = api.post(
            "/api/v1/memory/context", {"user_id": "caroline", "query": TEXT, "max_tokens": 4000}, format="json"
        )
        assert response.status_code == 200, response.content
        return {item["id"] for item in response.json()["items"]}

    every_type = sorted(SOURCES)
    before = searched(user_id="caroline", memory_types=every_type)
    assert {str(pk) for pk in gone} <= before  # what the delete must hide is found until then
    assert {str(doomed[0].pk), str(kept.pk)} <= context_items()

    response = api.delete("/api/v1/sessions/chat-1/?user_id=caroline")
    assert response.status_code == 202, response.content
    assert MemoryTask.objects.get(pk=response.json()["task_id"]).status == "queued"  # the purge has not run

    assert searched(user_id="caroline", session_id="chat-1") == set()
    for method in ("bm25", "embedding", "hybrid", "fuzzy"):
        found = searched(user_id="caroline", memory_types=every_type, search_method=method)
        assert not found & {str(pk) for pk in gone}, method
    found = searched(user_id="caroline", memory_types=every_type)
    assert {str(kept.pk), str(still.pk)} <= found and not found & {str(pk) for pk in gone}
    response = api.get("/api/v1/memory/search_all_users", {"query": TEXT, "memory_types": ",".join(every_type)})
    assert not {item["id"] for item in response.json()["results"]} & {str(pk) for pk in gone}
    in_context = context_items()
    assert str(kept.pk) in in_context and not in_context & {str(pk) for pk in gone}
    # Read by id, they are gone too: a memory learned from the session, and its turn.
    assert api.get(f"/api/v1/memory/semantic/{fact.pk}").status_code == 404
    assert api.get(f"/api/v1/memory/semantic/{still.pk}").status_code == 200
    assert api.delete(f"/api/v1/memory/message/{doomed[0].pk}").status_code == 404

    run_tasks("delete_session")
    assert not Message.objects.filter(pk=doomed[0].pk).exists()
    assert not searched(user_id="caroline", memory_types=every_type) & {str(pk) for pk in gone}


def test_a_rule_that_joins_or_transforms_the_readers_values_is_refused(client_a):
    from apps.conversations.serializers import MessageOutputSerializer

    with pytest.raises(ImproperlyConfigured, match="may not join"):
        where_sql(Message, Q(session__session_id="s1"), alias="t")
    transforming = SearchSource(
        memory_type="transforming",
        model=Message,
        output=MessageOutputSerializer,
        item_fields=("content",),
        text=lambda message: message.content,
        visible=lambda reader, user_id: Q(
            organization_id=reader.organization_id, scope__contains=reader.read_scopes[0]
        ),
    )
    with pytest.raises(ImproperlyConfigured, match="transforms the reader's values"):
        visibility_sql(transforming, reader=client_a.reader, user_id=None)


def test_a_reader_of_no_scope_sees_nothing(client_a):
    reading_nothing = ClientFactory(organization=client_a.organization, write_scope=None, read_scopes=[])
    assert visibility_sql(SOURCES["message"], reader=reading_nothing.reader, user_id=None) == ("FALSE", [])

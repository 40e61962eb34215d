"""apps/profiles/services/entities.py: who a user's memory names, where, and who is seen with whom."""

import pytest

from apps.memories.models import SemanticMemory
from apps.pipeline.models import MemoryTask
from apps.profiles.models import Edge, Entity, Mention
from apps.profiles.services.entities import session_project
from tests.profiles.makers import conversation_messages

pytestmark = pytest.mark.django_db


def names(**filters) -> dict[str, str]:
    return dict(Entity.objects.filter(**filters).values_list("name", "kind"))


def test_speakers_recurring_names_and_places_become_entities_with_mentions(conversation, rules):
    result = session_project(session=conversation)

    assert names() == {"Caroline": "person", "Melanie": "person", "Jon": "person", "Yosemite": "place"}
    # "Mel" is said once, "Hey" opens a sentence, "Did" opens a question: none is an entity.
    caroline, jon = Entity.objects.get(name="Caroline"), Entity.objects.get(name="Jon")
    assert caroline.mention_count == 4 and not caroline.is_user  # 3 turns spoken + named once by Melanie
    assert Mention.objects.filter(entity=caroline, spoken=True).count() == 3
    assert sorted(Mention.objects.filter(entity=jon).values_list("seq", flat=True)) == [3, 4, 5, 6]
    assert result == {"mentions": Mention.objects.count(), "entities": 4, "changed_entities": 4}


def test_organisations_are_named_by_their_last_word_or_by_what_precedes_them(client_a, add_messages, rules):
    turns = [
        ("Caroline", "I started a new job at Northwind last week, the pay is better."),
        ("Melanie", "Congrats! My cousin studied at Stanford University and loved it."),
        ("Caroline", "I also volunteer with Lumina on weekends. Jon came along twice."),
        ("Melanie", "We met Jon in Denver, then again in Denver last spring."),
    ]
    add_messages(client_a, user_id="caroline", session_id="orgs", messages=conversation_messages(turns))
    from apps.conversations.models import Session

    session_project(session=Session.objects.get(session_id="orgs"))

    found = names()
    assert {name: found[name] for name in ("Northwind", "Stanford University", "Lumina")} == {
        "Northwind": "organization",
        "Stanford University": "organization",
        "Lumina": "organization",
    }
    assert found["Denver"] == "place" and "Jon" not in found  # "Jon" opens a sentence once and is named once
    assert Mention.objects.filter(entity__name="Northwind").count() == 1


def test_a_memorys_subject_that_names_an_organisation_is_one(conversation):
    SemanticMemory.objects.create(
        organization=conversation.organization,
        scope=conversation.scope,
        end_user=conversation.end_user,
        name="Riverside Hospital",
        summary="Riverside Hospital is where Caroline had her surgery.",
        source_message_ids=[conversation.messages.get(seq=1).pk],
    )

    session_project(session=conversation)

    assert names(name="Riverside Hospital") == {"Riverside Hospital": "organization"}


def test_co_occurrence_edges_carry_weight_and_evidence(conversation):
    session_project(session=conversation)
    caroline, jon = Entity.objects.get(name="Caroline"), Entity.objects.get(name="Jon")
    source, target = sorted([caroline, jon], key=lambda entity: entity.pk)
    edge = Edge.objects.get(source=source, target=target)

    assert edge.weight == 2  # turns 3 and 5: Caroline speaks of Jon
    assert sorted(item["seq"] for item in edge.evidence) == [3, 5]
    assert all(item["item_type"] == "message" and item["session_id"] == str(conversation.pk) for item in edge.evidence)


def test_projection_is_idempotent(conversation):
    session_project(session=conversation)
    before = sorted(Mention.objects.values_list("entity__name", "item_id", "spoken"))
    edges = sorted(Edge.objects.values_list("source__name", "target__name", "weight"))

    again = session_project(session=conversation)

    assert sorted(Mention.objects.values_list("entity__name", "item_id", "spoken")) == before
    assert sorted(Edge.objects.values_list("source__name", "target__name", "weight")) == edges
    assert again["changed_entities"] == 0


def test_an_unnamed_user_turn_is_the_end_user(client_a, add_messages, rules):
    add_messages(
        client_a,
        user_id="sam",
        session_id="plain",
        messages=[
            {"role": "user", "content": "I love sailing with my brother."},
            {"role": "assistant", "content": "Sailing sounds wonderful!"},
        ],
    )
    from apps.conversations.models import Session

    session_project(session=Session.objects.get(session_id="plain"))

    (entity,) = Entity.objects.all()
    assert (entity.name, entity.is_user, entity.mention_count) == ("sam", True, 1)


def test_memories_learned_from_the_session_mention_their_subjects(conversation):
    turn = conversation.messages.get(seq=3)
    SemanticMemory.objects.create(
        organization=conversation.organization,
        scope=conversation.scope,
        end_user=conversation.end_user,
        name="Jon",
        summary="Jon helped Caroline with the adoption forms.",
        source_message_ids=[turn.pk],
    )

    session_project(session=conversation)

    memory_mentions = Mention.objects.filter(item_type="semantic")
    assert sorted(memory_mentions.values_list("entity__name", flat=True)) == ["Caroline", "Jon"]
    assert set(memory_mentions.values_list("seq", flat=True)) == {3}


def test_changed_entities_get_one_debounced_compile_each(conversation, settings):
    settings.PROFILE_COMPILE_DEBOUNCE_SECONDS = 30
    session_project(session=conversation)
    session_project(session=conversation)

    compiles = MemoryTask.objects.filter(task_type="compile_profile")
    assert compiles.count() == 4
    assert {task.payload["entity"] for task in compiles} == {
        str(pk) for pk in Entity.objects.values_list("pk", flat=True)
    }
    assert all((task.run_after - task.created_at).total_seconds() >= 29 for task in compiles)


def test_the_ingest_route_queues_projection_for_conversation_sessions_only(client_a, add_messages, rules):
    conversation = add_messages(client_a, user_id="u", session_id="talk", messages=conversation_messages())
    task_session = add_messages(client_a, user_id="u", session_id="job", session_tag="task")
    types = lambda body: set(MemoryTask.objects.filter(pk__in=body["task_ids"]).values_list("task_type", flat=True))  # noqa: E731
    assert "project_entities" in types(conversation)
    assert "project_entities" not in types(task_session)

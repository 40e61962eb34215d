"""apps/profiles/services/compile.py: a page per person, every line traceable, every revision kept."""

import pytest

from apps.profiles.models import Entity, Profile, ProfileRevision
from apps.profiles.services.compile import profile_compile
from apps.profiles.services.entities import session_project
from apps.providers.models import LLMUsage

pytestmark = pytest.mark.django_db


def compiled(name: str, **options) -> tuple[Profile, dict]:
    result = profile_compile(entity=Entity.objects.get(name=name), **options)
    return Profile.objects.get(entity__name=name), result


def test_offline_the_page_groups_what_the_person_said_by_kind_newest_first_and_quotes_it(conversation, rules):
    session_project(session=conversation)

    profile, result = compiled("Melanie")

    page = profile.markdown
    assert page.startswith("# Melanie\n")
    sections = [line for line in page.splitlines() if line.startswith("## ")]
    assert sections == ["## Preferences", "## Constraints", "## Plans"]
    assert '- "I love painting, and I took my kids to the museum last week."' in page
    assert "\"I can't eat gluten, so I'll bring my own snacks.\"" in page
    # Newest first: turn 6 (trail mix) is listed before turn 2 (painting) among the preferences.
    assert page.index("I love trail mix") < page.index("I love painting")
    assert "chat-1 #6" in page
    (revision,) = profile.revisions.all()
    assert (revision.number, revision.model, revision.prompt_tokens) == (1, "rules", 0)
    quotes = {source.quote for source in profile.sources.all()}
    assert quotes == {source["quote"] for source in revision.sources}
    assert all(part in page for quote in quotes for part in quote.split(" … "))
    assert result == {"profile": str(profile.pk), "revision": 1, "changed": True, "sources": len(profile.source_refs)}
    assert profile.embedding is not None and profile.status == "active"


def test_what_others_said_about_a_person_is_on_their_page(conversation, rules):
    session_project(session=conversation)

    page = compiled("Jon")[0].markdown

    assert "## What others said" in page
    assert "My friend Jon helped me with the forms." in page


def test_an_unchanged_page_keeps_its_revision_and_new_evidence_makes_the_next(
    conversation, add_messages, client_a, rules
):
    session_project(session=conversation)
    compiled("Caroline")
    assert compiled("Caroline")[1]["changed"] is False

    add_messages(
        client_a,
        user_id="caroline",
        session_id="chat-2",
        messages=[
            {"role": "user", "name": "Caroline", "content": "I started pottery classes on Tuesdays."},
        ],
    )
    from apps.conversations.models import Session

    session_project(session=Session.objects.get(session_id="chat-2"))
    profile, result = compiled("Caroline")

    assert result["changed"] is True and profile.revision == 2
    assert list(profile.revisions.values_list("number", flat=True)) == [2, 1]
    assert "pottery" in profile.markdown and "pottery" not in profile.revisions.get(number=1).markdown


def test_with_an_llm_the_page_keeps_only_the_evidence_it_used_and_its_token_usage(conversation, fake_openai):
    session_project(session=conversation)
    fake_openai.add_json(
        {"markdown": "# Melanie\n- Loves painting [1]\n- Cannot eat gluten [2]", "used": [1, 2, 99, "x"]},
        prompt_tokens=321,
        completion_tokens=45,
    )

    profile, _ = compiled("Melanie")

    (request,) = fake_openai.chat_requests()
    prompt = request["messages"][1]["content"]
    assert (
        "Person: Melanie" in prompt and "[1]" in prompt and "Use only the evidence" in request["messages"][0]["content"]
    )
    assert profile.markdown.startswith("# Melanie\n- Loves painting [1]")
    # Evidence 1 and 2 are two sentences of turn 6, quoted together; 99 and "x" were never shown: ignored.
    (source,) = profile.sources.all()
    assert source.quote == "I can't eat gluten, so I'll bring my own snacks. … I love trail mix."
    assert profile.source_refs == [{"item_type": "message", "item_id": str(source.item_id)}]
    revision = profile.revisions.get()
    assert (revision.model, revision.prompt_tokens, revision.completion_tokens) == ("fake-model", 321, 45)
    assert LLMUsage.objects.filter(purpose="compile_profile").count() == 1


def test_an_unusable_llm_answer_falls_back_to_the_offline_page(conversation, fake_openai):
    session_project(session=conversation)
    fake_openai.add_json({"text": "no markdown here"})

    profile, _ = compiled("Melanie")

    revision = profile.revisions.get()
    assert revision.model == "rules" and "unusable" in revision.reason
    assert "## Preferences" in profile.markdown


def test_a_person_with_nothing_left_to_quote_is_archived(conversation, rules):
    session_project(session=conversation)
    compiled("Jon")
    conversation.messages.all().delete()
    from apps.profiles.services.lint import profiles_lint

    profiles_lint()  # drops the dangling mentions (and archives the page: all its sources are gone)
    profile, result = compiled("Jon")

    assert profile.status == "archived" and profile.markdown == "" and profile.source_refs == []
    assert ProfileRevision.objects.filter(profile=profile).count() == 1  # history is kept

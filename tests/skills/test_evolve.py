"""Evolution: the rule path on real trajectories, the LLM path through the fake server, review mode."""

import pytest
from django.db import connections

from apps.pipeline.models import MemoryTask
from apps.pipeline.services import task_execute
from apps.skills.models import Skill, SkillExperience, SkillVersion
from apps.skills.services.distill import session_distill
from apps.skills.services.evolve.run import edit_budget, skills_evolve
from apps.skills.services.skills import skill_update
from tests.fixtures import tau_trajectories
from tests.skills.factories import ExperienceFactory, SkillFactory, tau_session

pytestmark = pytest.mark.django_db


def _distil(client, trajectories):
    for trajectory in trajectories:
        session_distill(session=tau_session(client, trajectory))


def _evolve_until_done(organization, scope="default") -> list[dict]:
    results = []
    while True:
        result = skills_evolve(organization=organization, scope=scope)
        results.append(result)
        if not result["remaining"] or not (result["consumed"] or result["superseded"]):
            return results


def test_the_edit_budget_grows_with_the_experiences_and_is_capped(settings):
    settings.EVOLUTION_MAX_EDITS = 6
    assert edit_budget(avoiding=0, learning=0) == 1
    assert edit_budget(avoiding=1, learning=2) == 3
    assert edit_budget(avoiding=40, learning=10) == 6


def test_rule_evolution_turns_workflow_lessons_into_versioned_workflow_skills_with_lineage(client_a, rules):
    successes = [item for item in tau_trajectories() if item["reward"] >= 1.0 and item["info"]["task"]["actions"]][:6]
    _distil(client_a, successes)
    learned = list(SkillExperience.objects.filter(experience_type="worth_learning"))

    _evolve_until_done(client_a.organization)

    skills = list(Skill.objects.filter(entry_type="workflow"))
    assert skills and all(
        skill.status == "active" and skill.scope == "default" and skill.end_user is None for skill in skills
    )
    signatures = {tuple(skill.action_signature) for skill in skills}
    assert signatures == {tuple(experience.action_signature) for experience in learned}  # one skill per signature
    for skill in skills:
        assert skill.embedding is not None and skill.embedding_model == "hash-384"
        assert skill.triggers and skill.instructions.startswith("Steps:\n1. ")
        versions = list(skill.versions.order_by("version"))
        assert [version.version for version in versions] == list(range(1, skill.version + 1))
        assert versions[0].operation == "create" and versions[0].actor == "evolution:rules"
        assert versions[-1].snapshot["instructions"] == skill.instructions
        lineage = [experience for version in versions for experience in version.experiences.all()]
        assert any(experience.action_signature == skill.action_signature for experience in lineage)
        assert all(
            experience.action_signature == skill.action_signature
            or (
                experience.experience_type == "worth_avoiding"
                and experience.action_signature[0] in skill.action_signature
            )
            for experience in lineage
        )
    assert not SkillExperience.objects.filter(status="pending").exists()
    assert SkillExperience.objects.filter(status="consumed").count() >= len(skills)


def test_a_known_workflow_gets_a_new_version_with_the_new_request_as_trigger(client_a, rules):
    rules.SKILL_SHARE_MIN_USERS = 1  # each experience is another user's; test_trust.py covers corroboration
    existing = SkillFactory(
        organization=client_a.organization,
        name="booking",
        triggers=["book a flight"],
        action_signature=["get_user_details", "book_reservation"],
    )
    experience = ExperienceFactory(
        organization=client_a.organization,
        content="Request: I need a flight to Denver\nSteps:\n1. get_user_details(user_id)",
    )
    result = skills_evolve(organization=client_a.organization, scope="default")
    existing.refresh_from_db()
    assert result["edited"] == ["booking"] and result["created"] == []
    assert existing.version == 2 and existing.triggers == ["book a flight", "I need a flight to Denver"]
    version = existing.versions.get(version=2)
    assert version.operation == "edit" and list(version.experiences.all()) == [experience]
    experience.refresh_from_db()
    assert experience.status == "consumed"

    # The same request from another user adds no trigger but a supporter: a vote, in the lineage.
    again = ExperienceFactory(organization=client_a.organization, content=experience.content)
    skills_evolve(organization=client_a.organization, scope="default")
    again.refresh_from_db()
    existing.refresh_from_db()
    assert again.status == "consumed" and existing.triggers == ["book a flight", "I need a flight to Denver"]
    assert again.end_user_id in existing.supporters and list(existing.versions.get(version=3).experiences.all()) == [
        again
    ]


def test_lessons_worth_avoiding_become_caveats_of_the_workflows_that_use_the_tool(client_a, rules):
    rules.SKILL_SHARE_MIN_USERS = 1  # one user's lesson is enough here; test_trust.py covers corroboration
    workflow = SkillFactory(
        organization=client_a.organization, name="booking", action_signature=["get_user_details", "book_reservation"]
    )
    other = SkillFactory(organization=client_a.organization, name="cancelling", action_signature=["cancel_reservation"])
    ExperienceFactory(
        organization=client_a.organization,
        experience_type="worth_avoiding",
        action_signature=["book_reservation"],
        title="book_reservation failed: Error: payment amount does not add up, total price is 375",
        content='Calling book_reservation failed with "Error: payment amount does not add up, total price is 375".',
        importance=0.7,
        credibility=0.9,
        evidence={"quote": "Error: payment amount does not add up", "signal_type": "tool_error"},
    )
    skills_evolve(organization=client_a.organization, scope="default")
    workflow.refresh_from_db()
    other.refresh_from_db()
    assert "\n\nCaveats:\n- Calling book_reservation failed" in workflow.instructions
    assert workflow.version == 2 and other.version == 1

    # The same error with other numbers is not a second caveat.
    duplicate = ExperienceFactory(
        organization=client_a.organization,
        experience_type="worth_avoiding",
        action_signature=["book_reservation"],
        content='Calling book_reservation failed with "Error: payment amount does not add up, total price is 1203".',
    )
    skills_evolve(organization=client_a.organization, scope="default")
    duplicate.refresh_from_db()
    workflow.refresh_from_db()
    assert duplicate.status == "superseded" and workflow.instructions.count("- Calling") == 1


def test_a_lesson_about_a_tool_no_workflow_uses_starts_a_guide(client_a, rules):
    ExperienceFactory(
        organization=client_a.organization,
        experience_type="worth_avoiding",
        action_signature=["update_reservation_baggages"],
        content='Calling update_reservation_baggages failed with "Error: gift card balance is not enough".',
    )
    skills_evolve(organization=client_a.organization, scope="default")
    guide = Skill.objects.get()
    assert (guide.name, guide.entry_type) == ("update-reservation-baggages-pitfalls", "guide")
    assert "gift card balance" in guide.instructions


def test_the_edit_budget_leaves_the_rest_pending_and_the_handler_continues_in_a_follow_up(client_a, rules, settings):
    settings.EVOLUTION_MAX_EDITS = 1
    for index in range(3):
        ExperienceFactory(
            organization=client_a.organization,
            action_signature=[f"tool_{index}"],
            content=f"Request: job {index}\nSteps:\n1. tool_{index}()",
        )
    from apps.pipeline.services import enqueue

    task = enqueue(
        "evolve_skills", {"scope": "default"}, organization=client_a.organization, idempotency_key="evolve:test"
    )
    assert task_execute(task_id=task.pk, worker="test") == "succeeded"
    task.refresh_from_db()
    assert task.result["budget"] == 1 and len(task.result["created"]) == 1
    assert task.result["remaining"] == 2
    follow_up = MemoryTask.objects.get(pk=task.result["follow_up_task"])
    assert follow_up.task_type == "evolve_skills" and follow_up.status == "queued"
    assert Skill.objects.count() == 1


def test_manual_review_mode_lands_evolved_skills_as_pending_review(client_a, rules, settings):
    settings.SKILL_REVIEW_MODE = "manual"
    live = SkillFactory(
        organization=client_a.organization, name="booking", action_signature=["get_user_details", "book_reservation"]
    )
    ExperienceFactory(
        organization=client_a.organization, content="Request: a flight to Denver\nSteps:\n1. get_user_details()"
    )
    ExperienceFactory(
        organization=client_a.organization,
        action_signature=["search_direct_flight"],
        content="Request: find flights\nSteps:\n1. search_direct_flight()",
    )
    skills_evolve(organization=client_a.organization, scope="default")
    live.refresh_from_db()
    created = Skill.objects.exclude(pk=live.pk).get()
    assert created.status == "pending_review" and live.status == "pending_review"


def test_evolution_stays_within_its_organisation_and_scope(client_a, foreign_client, rules):
    ExperienceFactory(organization=foreign_client.organization)
    ExperienceFactory(organization=client_a.organization, scope="other")
    assert skills_evolve(organization=client_a.organization, scope="default")["experiences"] == 0
    assert Skill.objects.count() == 0


# The LLM evolver ----------------------------------------------------------------------------------


def test_llm_operations_create_edit_and_merge_with_lineage(client_a, fake_openai, settings):
    settings.SKILL_SHARE_MIN_USERS = 1  # one user's lessons may edit shared skills; test_trust.py covers corroboration
    org = client_a.organization
    booking = SkillFactory(organization=org, name="booking", description="Book a flight for a customer.")
    first = SkillFactory(organization=org, name="refund-a", description="Refund rules A.")
    second = SkillFactory(organization=org, name="refund-b", description="Refund rules B.")
    e1 = ExperienceFactory(
        organization=org, experience_type="worth_avoiding", importance=0.9, credibility=0.9, title="Check seats"
    )
    e2 = ExperienceFactory(organization=org, importance=0.5, credibility=0.5, title="Compensation")
    e3 = ExperienceFactory(organization=org, importance=0.1, credibility=0.1, title="Noise")
    fake_openai.add_json(
        {
            "operations": [
                {
                    "op": "edit",
                    "skill": "booking",
                    "changes": {"description": "Book a flight for a customer, seats first."},
                    "experiences": ["E1"],
                },
                {
                    "op": "create",
                    "name": "Offer Compensation",
                    "description": "When to offer a certificate.",
                    "instructions": "Offer it only after a complaint.",
                    "triggers": ["delayed flight"],
                    "examples": [],
                    "entry_type": "guide",
                    "experiences": ["E2"],
                },
                {
                    "op": "merge",
                    "skills": ["refund-a", "refund-b"],
                    "into": {
                        "name": "refund-a",
                        "description": "Refund rules.",
                        "instructions": "A and B.",
                        "triggers": [],
                        "examples": [],
                        "entry_type": "guide",
                    },
                    "experiences": ["E2"],
                },
            ]
        }
    )
    result = skills_evolve(organization=org, scope="default")

    assert (
        result["created"] == ["offer-compensation"]
        and result["edited"] == ["booking"]
        and result["merged"] == ["refund-a"]
    )
    booking.refresh_from_db()
    assert booking.description == "Book a flight for a customer, seats first." and booking.version == 2
    assert list(booking.versions.get(version=2).experiences.all()) == [e1]
    assert booking.versions.get(version=2).actor == "evolution:llm:fake-model"
    created = Skill.objects.get(name="offer-compensation")
    assert (created.entry_type, created.triggers, created.status) == ("guide", ["delayed flight"], "active")
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.status == "active" and first.versions.get(version=2).operation == "merge"
    assert second.status == "archived" and "merged into refund-a" in second.versions.get(version=2).reason
    assert Skill.objects.filter(pk=second.pk).exists()  # archived, never deleted
    statuses = dict(SkillExperience.objects.values_list("title", "status"))
    assert statuses == {e1.title: "consumed", e2.title: "consumed", e3.title: "superseded"}

    (request,) = fake_openai.chat_requests()
    prompt = request["messages"][1]["content"]
    assert prompt.index("Check seats") < prompt.index("Compensation") < prompt.index("Noise")  # ranked


def test_llm_rewrites_deletes_and_unknown_references_are_refused(client_a, fake_openai):
    org = client_a.organization
    booking = SkillFactory(
        organization=org, name="booking", description="Book a flight for a customer after checking the profile."
    )
    kept = ExperienceFactory(organization=org)
    fake_openai.add_json(
        {
            "operations": [
                {
                    "op": "edit",
                    "skill": "booking",
                    "changes": {"description": "Completely different text about something else entirely, zebra."},
                    "experiences": ["E1"],
                },
                {"op": "delete", "skill": "booking", "experiences": ["E1"]},
                {"op": "edit", "skill": "no-such-skill", "changes": {"description": "x"}, "experiences": ["E1"]},
                {
                    "op": "create",
                    "name": "x",
                    "description": "d",
                    "instructions": "i",
                    "entry_type": "recipe",
                    "experiences": ["E1"],
                },
                {"op": "create", "name": "y", "description": "d", "instructions": "i", "experiences": ["E9"]},
            ]
        }
    )
    result = skills_evolve(organization=org, scope="default")
    problems = " ".join(result["problems"])
    assert "rewrite" in problems and "no delete" in problems and "no-such-skill" in problems and "recipe" in problems
    assert "experiences must name" in problems
    booking.refresh_from_db()
    assert booking.version == 1 and Skill.objects.count() == 1
    kept.refresh_from_db()
    assert kept.status == "pending"  # nothing decided: it waits for the next run


def test_garbage_from_the_llm_evolver_changes_nothing(client_a, fake_openai):
    experience = ExperienceFactory(organization=client_a.organization)
    fake_openai.add_text("Sure! Here are some operations: create a skill.")
    result = skills_evolve(organization=client_a.organization, scope="default")
    assert result["problems"] and result["consumed"] == result["superseded"] == 0
    experience.refresh_from_db()
    assert experience.status == "pending" and Skill.objects.count() == 0 and SkillVersion.objects.count() == 0


def test_lessons_with_an_extra_lookup_or_reads_in_another_order_join_one_workflow(client_a, rules):
    rules.SKILL_SHARE_MIN_USERS = 1  # each experience is another user's; test_trust.py covers corroboration
    organization = client_a.organization
    first = ExperienceFactory(
        organization=organization,
        title="Workflow: get_user_details → get_reservation_details → search_direct_flight → update_reservation_flights",
        content="Request: move my flight to Friday\nSteps:\n1. get_user_details(user_id)\n2. update_reservation_flights(...)",
        action_signature=[
            "get_user_details",
            "get_reservation_details",
            "search_direct_flight",
            "update_reservation_flights",
        ],
    )
    second = ExperienceFactory(
        organization=organization,
        title="Workflow: get_reservation_details → get_user_details → … → calculate",
        content="Request: I want a later flight\nSteps:\n1. get_reservation_details(id)\n2. update_reservation_flights(...)",
        action_signature=[
            "get_reservation_details",
            "get_user_details",
            "search_direct_flight",
            "update_reservation_flights",
            "calculate",
        ],
    )
    other = ExperienceFactory(
        organization=organization,
        title="Workflow: get_user_details → get_reservation_details → cancel_reservation",
        content="Request: cancel my trip\nSteps:\n1. cancel_reservation(id)",
        action_signature=["get_user_details", "get_reservation_details", "cancel_reservation"],
    )
    _evolve_until_done(organization)
    workflows = {skill.name: skill for skill in Skill.objects.filter(organization=organization, entry_type="workflow")}
    assert len(workflows) == 2
    joined = next(skill for skill in workflows.values() if "update_reservation_flights" in skill.action_signature)
    assert joined.triggers == ["move my flight to Friday", "I want a later flight"]
    lineage = SkillExperience.objects.filter(skill_versions__skill=joined).distinct()
    assert set(lineage) == {first, second}
    assert other not in lineage


@pytest.mark.django_db(transaction=True)
def test_no_transaction_is_open_while_the_models_answer_and_a_skill_edited_meanwhile_is_left_alone(
    client_a, fake_openai, settings
):
    """Plan outside, commit inside: the LLM and the embeddings are called with no transaction (so
    no row lock) open, and a skill a person edits while the model thinks is not overwritten."""
    settings.EMBEDDING_PROVIDER = "openai"
    settings.SKILL_SHARE_MIN_USERS = 1  # one user's lesson may edit the shared skill
    org = client_a.organization
    booking = SkillFactory(organization=org, name="booking", description="Book a flight for a customer.")
    refunds = SkillFactory(organization=org, name="refunds", description="Refund a cancelled flight.")
    e1 = ExperienceFactory(organization=org, importance=0.9, credibility=0.9, title="Seats first")
    e2 = ExperienceFactory(organization=org, importance=0.5, credibility=0.5, title="Refund to the card")
    fake_openai.add_json(
        {
            "operations": [
                {
                    "op": "edit",
                    "skill": "booking",
                    "changes": {"description": "Book a flight for a customer, seats first."},
                    "experiences": ["E1"],
                },
                {
                    "op": "edit",
                    "skill": "refunds",
                    "changes": {"description": "Refund a cancelled flight to the card."},
                    "experiences": ["E2"],
                },
            ]
        }
    )
    evolving = connections["default"]
    in_transaction = []

    def person_edits_while_the_model_thinks(path):
        in_transaction.append((path.rsplit("/", 1)[-1], evolving.in_atomic_block))
        if path.endswith("/chat/completions"):
            try:
                skill_update(
                    skill=Skill.objects.get(pk=refunds.pk),
                    changes={"triggers": ["refund"]},
                    actor="person",
                    reason="curated",
                )
            finally:
                connections.close_all()

    fake_openai.on_request = person_edits_while_the_model_thinks
    result = skills_evolve(organization=org, scope="default")

    assert ("completions", False) in in_transaction and ("embeddings", False) in in_transaction
    assert all(not atomic for _, atomic in in_transaction)
    assert result["edited"] == ["booking"] and "refunds changed during the run" in " ".join(result["problems"])
    booking.refresh_from_db()
    refunds.refresh_from_db()
    assert booking.description == "Book a flight for a customer, seats first." and booking.version == 2
    assert (refunds.version, refunds.triggers, refunds.description) == (2, ["refund"], "Refund a cancelled flight.")
    statuses = dict(SkillExperience.objects.values_list("title", "status"))
    assert statuses == {e1.title: "consumed", e2.title: "pending"}  # e2 waits for the next run


def test_the_evolvers_prompt_shows_every_experience_within_the_token_budget(client_a, fake_openai, settings):
    from apps.providers.tokens import prompt_tokens

    settings.LLM_MAX_PROMPT_TOKENS = 4000
    org = client_a.organization
    long_text = "Check the passenger's reservation, then the fare rules, then ask before charging. " * 20
    for _ in range(settings.EVOLUTION_MAX_EXPERIENCES):
        ExperienceFactory(organization=org, content=long_text)
    for _ in range(30):
        SkillFactory(organization=org, instructions=long_text)
    fake_openai.add_json({"operations": []})

    skills_evolve(organization=org, scope="default")

    (request,) = fake_openai.chat_requests()
    prompt = request["messages"][1]["content"]
    assert prompt_tokens(request["messages"]) <= 4000
    # No experience is left out (it would be consumed unseen); the skills shown, trimmed, are those that fit.
    assert all(f"E{n} [worth_learning, credibility 0.50] Lesson" in prompt for n in range(1, 51))
    assert 0 < prompt.count('{"name": "skill-') < 30 and long_text not in prompt

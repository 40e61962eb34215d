"""Factories and fixtures' helpers for skill memory tests."""

import factory

from apps.conversations.models import Session
from apps.conversations.services.ingest import messages_ingest
from apps.skills.models import Skill, SkillExperience
from tests.factories import ClientFactory, EndUserFactory, OrganizationFactory


def task_session(client, *, messages, session_id="task-1", user_id="user-1", outcome="success", seal=True) -> Session:
    """A task session stored through the real ingest service."""
    messages_ingest(
        client=client,
        user_id=user_id,
        session_id=session_id,
        messages=messages,
        session_tag="task",
        seal=seal,
        outcome=outcome,
    )
    return Session.objects.select_related("organization").get(
        organization=client.organization, scope=client.write_scope, session_id=session_id, end_user__user_id=user_id
    )


def tau_session(client, trajectory: dict, *, session_id=None, user_id="user-1") -> Session:
    outcome = "success" if trajectory["reward"] >= 1.0 else "failure"
    return task_session(
        client,
        messages=trajectory["traj"],
        session_id=session_id or f"tau-{trajectory['task_id']}-{trajectory['trial']}",
        user_id=user_id,
        outcome=outcome,
    )


class SkillFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Skill
        skip_postgeneration_save = True

    organization = factory.SubFactory(OrganizationFactory)
    scope = "default"
    name = factory.Sequence(lambda n: f"skill-{n}")
    description = "Book a flight for a customer after checking their profile."
    instructions = "Steps:\n1. get_user_details(user_id)\n2. book_reservation(flights)"
    triggers = factory.LazyFunction(lambda: ["book a flight"])
    examples = factory.LazyFunction(list)
    entry_type = Skill.EntryType.WORKFLOW
    status = Skill.Status.ACTIVE
    # A person's skill (no lineage), served to every user of the scope like skill_create makes it.
    shared = True
    action_signature = factory.LazyFunction(lambda: ["get_user_details", "book_reservation"])

    @factory.post_generation
    def embed(skill, create, extracted, **kwargs):
        from apps.providers.embeddings import embed_texts, embedding_model_name

        (skill.embedding,) = embed_texts([skill.embedding_text()])
        skill.embedding_model = embedding_model_name()
        if create:
            skill.save(update_fields=["embedding", "embedding_model"])


class ExperienceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = SkillExperience

    organization = factory.SubFactory(OrganizationFactory)
    scope = "default"
    end_user = factory.SubFactory(EndUserFactory, organization=factory.SelfAttribute("..organization"))
    created_by = factory.SubFactory(ClientFactory, organization=factory.SelfAttribute("..organization"))
    experience_type = "worth_learning"
    title = factory.Sequence(lambda n: f"Lesson {n}")
    content = "Request: book a flight to Seattle\nSteps:\n1. get_user_details(user_id)\n2. book_reservation(flights)"
    importance = 0.6
    credibility = 0.5
    evidence = factory.LazyFunction(lambda: {"quote": "book a flight to Seattle", "signal_type": "inferred"})
    action_signature = factory.LazyFunction(lambda: ["get_user_details", "book_reservation"])

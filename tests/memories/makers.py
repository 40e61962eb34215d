"""Makers of searchable memories (tests/search/makers.py format), and small factories for tests."""

from datetime import datetime, timezone

from apps.memories.models import EpisodicMemory, SemanticMemory
from apps.providers.embeddings import embed_texts, embedding_model_name
from apps.tenancy.services import end_user_get_or_create

DEFAULT_OCCURRED_AT = datetime(2023, 5, 7, tzinfo=timezone.utc)


def _owner(organization, scope, user_id):
    return {
        "organization": organization,
        "scope": scope,
        "end_user": end_user_get_or_create(organization=organization, user_id=user_id),
    }


def episodic(organization, scope, user_id, summary, *, occurred_at=DEFAULT_OCCURRED_AT, **fields):
    (vector,) = embed_texts([summary])
    return EpisodicMemory.objects.create(
        **_owner(organization, scope, user_id),
        summary=summary,
        occurred_at=occurred_at,
        embedding=vector,
        embedding_model=embedding_model_name(),
        **fields,
    )


def semantic(organization, scope, user_id, name, summary, **fields):
    (vector,) = embed_texts([f"{name}: {summary}"])
    return SemanticMemory.objects.create(
        **_owner(organization, scope, user_id),
        name=name,
        summary=summary,
        embedding=vector,
        embedding_model=embedding_model_name(),
        **fields,
    )


def make_episodic(client, user_id, text, add_messages=None):
    return episodic(
        client.organization, client.write_scope, user_id, text, actor=user_id, event_type="test", created_by=client
    )


def make_semantic(client, user_id, text, add_messages=None):
    return semantic(client.organization, client.write_scope, user_id, user_id, text, created_by=client)


MAKERS = {"episodic": make_episodic, "semantic": make_semantic}

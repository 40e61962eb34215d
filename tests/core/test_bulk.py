"""Inserts without the ORM's per-row work (apps.core.bulk), against the real database."""

import pytest
from django.db import IntegrityError, transaction

from apps.conversations.models import Message, Session
from apps.core.bulk import copy_create, insert_unless_conflict
from tests.factories import ClientFactory, EndUserFactory


@pytest.fixture
def session():
    client = ClientFactory()
    end_user = EndUserFactory(organization=client.organization)
    return Session.objects.create(
        organization=client.organization, end_user=end_user, client=client, scope="default", session_id="s1"
    )


def _turn(session, seq: int, **values) -> dict:
    return {
        "organization_id": session.organization_id,
        "end_user_id": session.end_user_id,
        "scope": session.scope,
        "session_id": session.pk,
        "seq": seq,
        "role": "user",
        "occurred_at": session.created_at,
        "created_by_id": session.client_id,
        **values,
    }


@pytest.mark.django_db
def test_copied_rows_take_the_defaults_of_the_fields_they_leave_out(session):
    stored = copy_create(Message, [_turn(session, 1, content="hi", tool_calls=[{"id": "c1"}]), _turn(session, 2)])

    assert stored == 2
    first, second = Message.objects.filter(session=session).order_by("seq")
    assert first.pk != second.pk  # a callable default (the UUID key) is called per row
    assert (first.content, first.tool_calls, first.metadata) == ("hi", [{"id": "c1"}], {})
    assert (second.content, second.name, second.tool_calls, second.truncated) == ("", "", None, False)
    assert first.created_at is not None and first.updated_at == first.created_at


@pytest.mark.django_db
def test_a_refused_row_stores_nothing_of_the_batch(session):
    with pytest.raises(IntegrityError), transaction.atomic():
        copy_create(Message, [_turn(session, 1), _turn(session, 2, role=None)])

    assert not Message.objects.filter(session=session).exists()


@pytest.mark.django_db
def test_an_insert_that_conflicts_says_so_and_stores_nothing(session):
    again = Session(
        organization=session.organization,
        end_user=session.end_user,
        client=session.client,
        scope=session.scope,
        session_id=session.session_id,
        session_tag="task",
    )
    other = Session(
        organization=session.organization,
        end_user=session.end_user,
        client=session.client,
        scope=session.scope,
        session_id="s2",
    )

    assert insert_unless_conflict(again) is False and again._state.adding
    assert insert_unless_conflict(other) is True and not other._state.adding
    assert Session.objects.get(session_id="s1").session_tag == "conversation"
    assert Session.objects.get(pk=other.pk).session_id == "s2"
    assert Session.objects.filter(organization=session.organization).count() == 2


@pytest.mark.django_db
def test_an_insert_refused_by_another_constraint_raises(session):
    bad = Session(
        organization=session.organization,
        end_user=session.end_user,
        client=session.client,
        scope=session.scope,
        session_id="s3",
        status="closed",
    )

    with pytest.raises(IntegrityError, match="session_status_valid"), transaction.atomic():
        insert_unless_conflict(bad)

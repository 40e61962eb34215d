"""DELETE /api/v1/memory/episodic/<id> and /memory/semantic/<id>: hard deletes within the write scope."""

import uuid

import pytest

from apps.memories.models import EpisodicMemory, EpisodicMemoryChange, SemanticMemory, SemanticMemoryChange
from apps.memories.services.memories import memory_soft_delete
from tests.conftest import api_for
from tests.factories import ClientFactory
from tests.memories.makers import episodic, semantic

pytestmark = pytest.mark.django_db


def _episodic(client):
    return episodic(client.organization, client.write_scope, "caroline", "Caroline went to a support group.")


def _semantic(client):
    return semantic(client.organization, client.write_scope, "caroline", "Caroline", "Caroline is from Sweden.")


@pytest.mark.parametrize(
    "memory_type,make,model,change_model",
    [
        ("episodic", _episodic, EpisodicMemory, EpisodicMemoryChange),
        ("semantic", _semantic, SemanticMemory, SemanticMemoryChange),
    ],
)
def test_delete_removes_the_memory_and_its_history_for_good(api, client_a, memory_type, make, model, change_model):
    memory = make(client_a)
    kept = make(client_a)
    memory_soft_delete(memory=kept, actor="test", reason="kept for the retention window")
    change_model.objects.create(memory=memory, operation="add", new_value={"summary": memory.summary}, actor="test")

    response = api.delete(f"/api/v1/memory/{memory_type}/{memory.pk}")
    assert response.status_code == 204
    assert not model.objects.filter(pk=memory.pk).exists()
    assert not change_model.objects.filter(memory_id=memory.pk).exists()
    # A soft-deleted memory can still be erased for good; a second delete is a 404.
    assert api.delete(f"/api/v1/memory/{memory_type}/{kept.pk}").status_code == 204
    assert api.delete(f"/api/v1/memory/{memory_type}/{kept.pk}").status_code == 404
    assert model.objects.count() == 0


@pytest.mark.parametrize("memory_type,make", [("episodic", _episodic), ("semantic", _semantic)])
def test_readable_is_not_writable_and_read_only_clients_cannot_delete(client_a, memory_type, make):
    memory = make(client_a)
    other_writer = ClientFactory(
        organization=client_a.organization, write_scope="team", read_scopes=["team", "default"]
    )
    response = api_for(other_writer).delete(f"/api/v1/memory/{memory_type}/{memory.pk}")
    assert response.status_code == 403 and "scope 'default'" in response.json()["error"]["message"]
    reader = ClientFactory(organization=client_a.organization, write_scope=None, read_scopes=["default"])
    assert api_for(reader).delete(f"/api/v1/memory/{memory_type}/{memory.pk}").status_code == 403
    outsider = ClientFactory(organization=client_a.organization, write_scope="team")  # cannot even read it
    assert api_for(outsider).delete(f"/api/v1/memory/{memory_type}/{memory.pk}").status_code == 404
    assert type(memory).objects.filter(pk=memory.pk).exists()


def test_the_wrong_type_and_malformed_ids_are_404s(api, client_a):
    memory = _episodic(client_a)
    assert api.delete(f"/api/v1/memory/semantic/{memory.pk}").status_code == 404
    malformed = api.delete("/api/v1/memory/episodic/not-a-uuid")
    assert malformed.status_code == 404
    assert malformed.content == api.delete(f"/api/v1/memory/episodic/{uuid.uuid4()}").content
    assert EpisodicMemory.objects.filter(pk=memory.pk).exists()

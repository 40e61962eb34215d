from datetime import timedelta

import pytest
from django.utils import timezone

from apps.memories.models import EpisodicMemory, SemanticMemory
from apps.memories.services.memories import memories_purge_deleted
from tests.memories.makers import episodic, semantic

pytestmark = pytest.mark.django_db


def test_soft_deleted_memories_are_purged_after_the_retention_window(organization, settings):
    settings.DELETED_MEMORY_RETENTION_DAYS = 30
    old = timezone.now() - timedelta(days=31)
    expired = episodic(organization, "default", "u", "expired", deleted_at=old)
    recent = episodic(organization, "default", "u", "recent", deleted_at=timezone.now() - timedelta(days=29))
    live = semantic(organization, "default", "u", "U", "live")
    expired_fact = semantic(organization, "default", "u", "U", "expired", deleted_at=old)

    assert memories_purge_deleted() == {"episodic": 1, "semantic": 1}
    assert set(EpisodicMemory.objects.values_list("pk", flat=True)) == {recent.pk}
    assert set(SemanticMemory.objects.values_list("pk", flat=True)) == {live.pk}
    assert not EpisodicMemory.objects.filter(pk=expired.pk).exists()
    assert not SemanticMemory.objects.filter(pk=expired_fact.pk).exists()


def test_a_retention_of_zero_keeps_soft_deleted_memories(organization, settings):
    settings.DELETED_MEMORY_RETENTION_DAYS = 0
    episodic(organization, "default", "u", "expired", deleted_at=timezone.now() - timedelta(days=3650))
    assert memories_purge_deleted() == {"episodic": 0, "semantic": 0}
    assert EpisodicMemory.objects.count() == 1

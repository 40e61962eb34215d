"""The abstract base every platform model inherits, and the session tag every layer routes by."""

import uuid

from django.db import models


class BaseModel(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class SessionTag(models.TextChoices):
    """What a session is (conversations.Session.session_tag): task sessions are distilled into skills,
    conversation sessions into episodic and semantic memories. Search filters by it too."""

    TASK = "task", "Task"
    CONVERSATION = "conversation", "Conversation"

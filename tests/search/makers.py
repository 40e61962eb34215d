"""One function per memory type that stores a searchable item for a client.

`make(client, user_id, text)` must create one item of that type, owned by `client`'s
organisation and write scope (and `user_id`), whose searchable text is `text`, with its
embedding filled. The scope matrix in test_scopes.py runs over every registered type and
fails if a type has no maker here.
"""

from apps.conversations.models import Message
from apps.pipeline.models import MemoryTask
from apps.pipeline.services import task_execute
from tests.memories.makers import make_episodic, make_semantic
from tests.profiles.makers import make_profile, make_topic
from tests.skills.makers import make_experience, make_skill


def make_message(client, user_id, text, add_messages):
    body = add_messages(
        client, user_id=user_id, session_id=f"s-{abs(hash(text)) % 10**8}", messages=[{"role": "user", "content": text}]
    )
    for task in MemoryTask.objects.filter(pk__in=body["task_ids"], task_type="embed_messages"):
        task_execute(task_id=task.pk, worker="test")
    return Message.objects.get(session__organization=client.organization, content=text)


MAKERS = {
    "message": make_message,
    "procedural": make_skill,
    "experience": make_experience,
    "episodic": make_episodic,
    "semantic": make_semantic,
    "profile": make_profile,
    "topic": make_topic,
}

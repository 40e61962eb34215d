"""A searchable profile page (tests/search/makers.py format), and a conversation to project."""

from django.utils import timezone

from apps.profiles.models import Entity, Profile
from apps.providers.embeddings import embed_texts, embedding_model_name
from apps.tenancy.services import end_user_get_or_create


def make_profile(client, user_id, text, add_messages=None):
    owner = {
        "organization": client.organization,
        "scope": client.write_scope,
        "end_user": end_user_get_or_create(organization=client.organization, user_id=user_id),
    }
    name = f"Person {abs(hash(text)) % 10**6}"
    entity = Entity.objects.create(**owner, name=name, aliases=[name.lower()])
    profile = Profile(
        **owner,
        entity=entity,
        name=name,
        markdown=text,
        revision=1,
        compiled_at=timezone.now(),
        embedding_model=embedding_model_name(),
    )
    (profile.embedding,) = embed_texts([profile.embedding_text()])
    profile.save()
    return profile


def make_topic(client, user_id, text, add_messages=None):
    """A compiled topic page (no entity) holding the text."""
    owner = {
        "organization": client.organization,
        "scope": client.write_scope,
        "end_user": end_user_get_or_create(organization=client.organization, user_id=user_id),
    }
    page = Profile(
        **owner,
        kind=Profile.Kind.TOPIC,
        name=f"Topic {abs(hash(text)) % 10**6}",
        markdown=text,
        revision=1,
        compiled_at=timezone.now(),
        embedding_model=embedding_model_name(),
    )
    (page.embedding,) = embed_texts([page.embedding_text()])
    page.save()
    return page


# Two friends talking, after LOCOMO's shape: named speakers, a third person named twice, a place.
CONVERSATION = [
    ("Caroline", "Hey Mel! I went to a support group yesterday and it was really powerful."),
    ("Melanie", "That sounds great, Caroline. I love painting, and I took my kids to the museum last week."),
    ("Caroline", "I'm planning to adopt a child next year. My friend Jon helped me with the forms."),
    ("Melanie", "Jon is so kind. We are going camping in Yosemite next month."),
    ("Caroline", "I really enjoy hiking too. Jon said he would come to Yosemite with us!"),
    ("Melanie", "I can't eat gluten, so I'll bring my own snacks. I love trail mix. Did Jon ever finish his painting?"),
]


def conversation_messages(turns=CONVERSATION):
    return [
        {"role": "user" if speaker == "Caroline" else "assistant", "name": speaker, "content": text}
        for speaker, text in turns
    ]

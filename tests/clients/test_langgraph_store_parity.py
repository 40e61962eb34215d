"""PlatformStore beside LangGraph's reference store (InMemoryStore): the same calls, the same answers
(scores and the order of a query's hits aside: the platform ranks with its own search); and what the
reference store does that a remote one must work for: atomic puts, complete filtered pages, TTLs."""

import datetime as dt

import anyio
import pytest
from langgraph.store.memory import InMemoryStore
from memory_platform_client import AsyncMemoryClient, MemoryClient, Retries
from memory_platform_client.adapters.langgraph_store import PlatformStore

from apps.memories.models import SemanticMemory

pytestmark = pytest.mark.django_db(transaction=True)

FAST = Retries(max_retries=2, backoff=0.01, max_backoff=0.05)

ITEMS = [
    (
        ("alice", "memories"),
        "sister",
        {"text": "Ana, my sister, lives in Lisbon", "kind": "family", "age": 30, "meta": {"by": "me", "n": 1}},
    ),
    (
        ("alice", "memories"),
        "pet",
        {"text": "My cat is called Miso", "kind": "pets", "age": 3, "tags": ["cat", "home"]},
    ),
    (("alice", "prefs", "food"), "likes", {"text": "loves grilled sardines", "age": 1, "meta": {"by": "app", "n": 2}}),
    (("alice", "prefs", "drink"), "coffee", {"text": "espresso, no sugar", "age": 7}),
]

# (method, args, kwargs): read calls whose answers must be the reference store's. (Every item has an
# `age`: the reference store raises TypeError comparing a missing field with $gt and the like, where
# the platform's reads it as no match, as PostgreSQL's JSONB does.)
CALLS = [
    ("get", (("alice", "memories"), "sister"), {}),
    ("get", (("alice", "memories"), "nobody"), {}),
    ("search", (("alice", "memories"),), {"filter": {"kind": "pets"}}),
    ("search", (("alice",),), {"filter": {"age": {"$gte": 3}}}),
    ("search", (("alice",),), {"filter": {"age": {"$gt": 3, "$lt": 10}}}),
    ("search", (("alice",),), {"filter": {"meta": {"by": "me"}}}),  # a nested partial object
    ("search", (("alice",),), {"filter": {"meta": {"n": 2}, "text": "loves grilled sardines"}}),
    ("search", (("alice",),), {"filter": {"tags": ["cat", "home"]}}),
    ("search", (("alice",),), {"filter": {"kind": {"$ne": "pets"}}}),
    ("search", (("alice", "prefs"),), {}),
    ("search", (("alice",),), {"query": "sardines", "filter": {"meta": {"by": "app"}}}),
    ("search", (("alice",),), {"limit": 2, "offset": 3}),
    ("list_namespaces", (), {"prefix": ("alice",)}),
    ("list_namespaces", (), {"prefix": ("alice",), "max_depth": 2}),
    ("list_namespaces", (), {"prefix": ("alice",), "suffix": ("food",)}),
]


def _shape(answer):
    """What must agree: items by namespace, key and value (sorted, a search's order being the platform's)."""
    if answer is None:
        return None
    if isinstance(answer, list):
        return sorted(map(repr, map(_shape, answer)))
    if isinstance(answer, tuple):
        return answer
    return (answer.namespace, answer.key, answer.value)


def test_the_same_calls_give_the_reference_stores_answers(live_server, client_a):
    reference = InMemoryStore()
    with MemoryClient(live_server.url, client_a.raw_key, timeout=10, retries=FAST) as client:
        platform = PlatformStore(client=client, index={"dims": 384, "embed": "unused:model", "fields": ["$"]})
        for store in (reference, platform):
            for namespace, key, value in ITEMS:
                store.put(namespace, key, value)
            store.put(("alice", "memories"), "pet", {**ITEMS[1][2], "age": 4})  # an update
            store.delete(("alice", "prefs", "drink"), "missing")  # deleting nothing is no error
        answers = {
            (method, repr(args), repr(kwargs)): (
                _shape(getattr(reference, method)(*args, **kwargs)),
                _shape(getattr(platform, method)(*args, **kwargs)),
            )
            for method, args, kwargs in CALLS
        }

    differences = {call: pair for call, pair in answers.items() if pair[0] != pair[1]}
    assert not differences, differences
    assert answers[("search", repr((("alice",),)), repr({"filter": {"meta": {"by": "me"}}}))][0], "the test can fail"


def test_twenty_concurrent_puts_of_one_key_leave_one_item(live_server, client_a):
    async def race(calls):
        async with AsyncMemoryClient(live_server.url, client_a.raw_key, timeout=30, retries=FAST) as client:
            store = PlatformStore(async_client=client)
            async with anyio.create_task_group() as group:
                for call in calls(store):
                    group.start_soon(*call)
            return await store.aget(("alice", "race"), "key")

    puts = lambda store: [(store.aput, ("alice", "race"), "key", {"text": f"writer {n}"}) for n in range(20)]  # noqa: E731
    stored = anyio.run(race, puts)
    count = SemanticMemory.objects.filter(name="race/key").count()
    deletes = lambda store: [(store.adelete, ("alice", "race"), "key") for _ in range(5)]  # noqa: E731
    after = anyio.run(race, deletes)

    assert count == 1 and stored.value["text"].startswith("writer ")
    assert after is None and not SemanticMemory.objects.filter(name="race/key").exists()


def test_a_filtered_or_offset_query_search_sees_past_the_top_hundred(live_server, client_a):
    with MemoryClient(live_server.url, client_a.raw_key, timeout=30, retries=FAST) as client:
        store = PlatformStore(client=client)
        for number in range(115):
            tag = "rare" if number % 23 == 0 else "common"
            store.put(("alice", "notes"), f"n{number:03d}", {"text": f"note number {number} about trips", "tag": tag})
        rare = store.search(("alice",), query="note about trips", filter={"tag": "rare"}, limit=10)
        tail = store.search(("alice",), query="note about trips", limit=20, offset=100)

    assert sorted(hit.key for hit in rare) == ["n000", "n023", "n046", "n069", "n092"]
    assert len(tail) == 15


def test_items_expire_after_their_ttl_and_a_read_refreshes_it(live_server, client_a):
    with MemoryClient(live_server.url, client_a.raw_key, timeout=10, retries=FAST) as client:
        store = PlatformStore(client=client, ttl={"default_ttl": 60, "refresh_on_read": True})
        store.put(("alice",), "kept", {"text": "default ttl"})
        store.put(("alice",), "brief", {"text": "expires at once"}, ttl=0.0001)
        store.put(("alice",), "forever", {"text": "no ttl"}, ttl=None)
        anyio.run(anyio.sleep, 0.05)
        found = {hit.key for hit in store.search(("alice",))}
        kept = store.get(("alice",), "kept")
        brief = store.get(("alice",), "brief")

    assert found == {"kept", "forever"} and brief is None and kept.value == {"text": "default ttl"}
    assert not SemanticMemory.objects.filter(name="brief").exists(), "an expired item is deleted when met"
    details = SemanticMemory.objects.get(name="kept").details
    assert '"ttl":60' in details and '"expires_at"' in details
    assert '"ttl"' not in SemanticMemory.objects.get(name="forever").details
    expires = dt.datetime.fromisoformat(details.split('"expires_at":"')[1].split('"')[0])
    assert dt.timedelta(minutes=59) < expires - dt.datetime.now(dt.UTC) <= dt.timedelta(minutes=60)

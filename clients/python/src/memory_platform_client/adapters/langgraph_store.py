"""LangGraph's `BaseStore` on the platform (`pip install 'memory-platform-client[langgraph]'`): the
long-term memory a graph reads and writes with `store.put/get/search/delete` (and `aput`…) kept as
the platform's semantic memories, so they are searched (hybrid: keywords and vectors), shown in
`memory/context`, consolidated, exported and erased like any other fact about the person.

Namespaces: `(user_id, *path)`. The first label is the end user the items are about; the rest
(`("alice", "memories")`, `("alice", "prefs", "food")`) is the item's folder. Writes go to the key's
write scope, reads cover its read scopes, as everywhere on the platform; another organisation's
items are never seen. (LangGraph refuses labels holding '.', so such user ids need a mapping.)

An item is one semantic memory: `name` is its folder and key (`prefs/food/likes`: the lookup index,
`GET memory/semantic/?subject=`), `summary` the text searched (the value's string leaves, or the
fields named by `index` / `index_fields`, cut to 1,000 characters), and `details` the item itself as
JSON (`{"langgraph_store": {"namespace", "key", "value"}}`, at most 4,000 characters). Memories the
platform learned from conversations are not store items (they carry no such JSON): read them with
`MemoryClient.search` or `context`.

A put is one upsert on the platform by the item's key (`store_key`), so concurrent puts of one key
leave one item. TTLs (`ttl=`, `TTLConfig`) live in the item's JSON: an expired item is hidden, and
deleted by the first read that meets it. What the platform has and `BaseStore` cannot say (skills,
session outcomes, feedback) stays on the SDK; the differences from LangGraph's reference store that
remain are listed, with their reasons, in clients/python/README.md."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)

from memory_platform_client._http import Call
from memory_platform_client._http import Op as Operation
from memory_platform_client.client import PAGE_SIZE, AsyncMemoryClient, MemoryClient, _segment
from memory_platform_client.errors import NotFoundError, PermissionDeniedError

ENVELOPE = "langgraph_store"
SOURCE = "langgraph store"
NAME_MAX_LENGTH = 255
SUMMARY_MAX_LENGTH = 1000
DETAILS_MAX_LENGTH = 4000
SEARCH_CANDIDATES = 100
SEMANTIC = "memory/semantic/"


def memory_name(path: tuple[str, ...], key: str) -> str:
    """The item's lookup name; a long one is hashed to fit the platform's 255 characters."""
    name = "/".join((*path, key))
    if len(name) <= NAME_MAX_LENGTH:
        return name
    return "langgraph-store:" + hashlib.sha256(json.dumps([*path, key]).encode()).hexdigest()


def _leaves(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [text for item in value.values() for text in _leaves(item)]
    if isinstance(value, (list, tuple)):
        return [text for item in value for text in _leaves(item)]
    if value is None:
        return []
    return [value if isinstance(value, str) else json.dumps(value)]


def _field(value: Any, path: str) -> Any:
    """A simple JSON path of LangGraph's index syntax: `a.b`, `a[0]`, `a[-1]`, `a[*]`, `$`."""
    if path in ("$", ""):
        return value
    current = [value]
    for part in path.replace("[", ".[").split("."):
        if not part:
            continue
        following = []
        for node in current:
            if part.startswith("["):
                index = part[1:-1]
                if isinstance(node, list):
                    if index == "*":
                        following.extend(node)
                    elif -len(node) <= int(index) < len(node):
                        following.append(node[int(index)])
            elif isinstance(node, dict) and part in node:
                following.append(node[part])
        current = following
    return current


def summary_text(key: str, value: dict, fields: list[str] | None | bool) -> str:
    if fields is False:
        return key
    texts = _leaves(value) if not fields else [text for path in fields for text in _leaves(_field(value, path))]
    text = "\n".join(part for part in texts if part.strip()) or key
    return text if len(text) <= SUMMARY_MAX_LENGTH else text[: SUMMARY_MAX_LENGTH - 1] + "…"


def _envelope(memory: dict) -> dict | None:
    """The store item a semantic memory holds, or None for a memory that is no store item."""
    details = memory.get("details") or ""
    if not details.startswith('{"' + ENVELOPE):
        return None
    try:
        item = json.loads(details)[ENVELOPE]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(item, dict) or not isinstance(item.get("value"), dict):
        return None
    return {
        "namespace": (memory["user_id"], *item.get("namespace", ())),
        "key": item.get("key"),
        "value": item["value"],
        "id": memory["id"],
        "scope": memory["scope"],
        "created_at": memory["created_at"],
        "updated_at": memory["updated_at"],
        "score": memory.get("score"),
        "ttl": item.get("ttl"),
        "expires_at": item.get("expires_at"),
    }


def store_key(path: tuple[str, ...], key: str) -> str:
    """The platform key an item is stored under (unique per user and scope: a put is one upsert)."""
    return "langgraph:" + hashlib.sha256(json.dumps([*path, key]).encode()).hexdigest()


def _details(path: tuple[str, ...], key: str, value: dict, ttl: float | None) -> str:
    item: dict[str, Any] = {"namespace": list(path), "key": key, "value": value}
    if ttl is not None:
        item["ttl"] = ttl
        item["expires_at"] = (dt.datetime.now(dt.UTC) + dt.timedelta(minutes=ttl)).isoformat()
    details = json.dumps({ENVELOPE: item}, ensure_ascii=False, separators=(",", ":"))
    if len(details) > DETAILS_MAX_LENGTH:
        raise ValueError(
            f"the item {key!r} is {len(details)} characters as JSON; the platform keeps at most "
            f"{DETAILS_MAX_LENGTH} per memory"
        )
    return details


def _expired(item: dict) -> bool:
    return bool(item["expires_at"]) and _timestamp(item["expires_at"]) <= dt.datetime.now(dt.UTC)


OPERATORS = {
    "$eq": lambda a, b: a == b,
    "$ne": lambda a, b: a != b,
    "$gt": lambda a, b: float(a) > float(b),
    "$gte": lambda a, b: float(a) >= float(b),
    "$lt": lambda a, b: float(a) < float(b),
    "$lte": lambda a, b: float(a) <= float(b),
}


def _compare(actual: Any, condition: Any) -> bool:
    """LangGraph's filter semantics (its reference store's): operators, a nested object matching part of
    the value (`{"a": {"b": 1}}` matches `{"a": {"b": 1, "c": 2}}`), a list matching element by element."""
    if isinstance(condition, dict):
        if any(str(op).startswith("$") for op in condition):
            for op, expected in condition.items():
                if op not in OPERATORS:
                    raise ValueError(f"unsupported filter operator {op!r}: use one of {', '.join(OPERATORS)}")
                try:
                    if not OPERATORS[op](actual, expected):
                        return False
                except (TypeError, ValueError):
                    return False
            return True
        return isinstance(actual, dict) and all(_compare(actual.get(key), want) for key, want in condition.items())
    if isinstance(condition, (list, tuple)):
        return (
            isinstance(actual, (list, tuple))
            and len(actual) == len(condition)
            and all(_compare(have, want) for have, want in zip(actual, condition))
        )
    return actual == condition


def matches_filter(value: dict, conditions: dict | None) -> bool:
    """A top-level field as the reference store reads it; a field absent from the value may also be a
    JSON path (`a.b`, `a[0]`), which the reference store does not read."""
    for field, condition in (conditions or {}).items():
        if field in value or ("." not in field and "[" not in field):
            found = value.get(field)
        else:
            found = _field(value, field)
            found = found[0] if found else None
        if not _compare(found, condition):
            return False
    return True


def _namespace_matches(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    path = tuple(condition.path)
    if len(path) > len(namespace):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[len(namespace) - len(path) :]
    return all(want in ("*", have) for want, have in zip(path, part))


def _timestamp(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value)


def _item(found: dict, search: bool = False) -> Item:
    fields = {
        "namespace": found["namespace"],
        "key": found["key"],
        "value": found["value"],
        "created_at": _timestamp(found["created_at"]),
        "updated_at": _timestamp(found["updated_at"]),
    }
    return SearchItem(**fields, score=found["score"]) if search else Item(**fields)


class PlatformStore(BaseStore):
    """`PlatformStore(client=MemoryClient(...), async_client=AsyncMemoryClient(...))` (either one
    for only `batch` or only `abatch`), then `graph.compile(store=...)` or `create_react_agent(...,
    store=...)`. `index`: LangGraph's `IndexConfig`; its `fields` (LangGraph's JSON path syntax;
    default: every string in the value) are what the platform searches, with its own embedding model
    (`dims` and `embed` are not used: the platform embeds every memory). `index_fields` is a shorthand
    for `index={"fields": [...]}`. `ttl`: LangGraph's `TTLConfig` (`default_ttl` and `refresh_on_read`)."""

    supports_ttl = True

    def __init__(
        self,
        *,
        client: MemoryClient | None = None,
        async_client: AsyncMemoryClient | None = None,
        index: IndexConfig | None = None,
        index_fields: list[str] | None = None,
        ttl: TTLConfig | None = None,
    ):
        if client is None and async_client is None:
            raise ValueError("pass client= (a MemoryClient), async_client= (an AsyncMemoryClient) or both")
        self.client = client
        self.async_client = async_client
        self.index_config = index
        self.index_fields = index_fields if index_fields is not None else (index or {}).get("fields")
        self.ttl_config = ttl
        self._scope: str | None = None

    # BaseStore's two abstract methods: every other method goes through them.

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        if self.client is None:
            raise RuntimeError("this store has no blocking client: pass client=MemoryClient(...), or use the a-methods")
        return self.client._driver.run(self._batch(list(ops)))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        if self.async_client is None:
            raise RuntimeError("this store has no async client: pass async_client=AsyncMemoryClient(...)")
        return await self.async_client._driver.run(self._batch(list(ops)))

    # The operations, written once as SDK operations (generators of calls) that either client runs.

    def _batch(self, ops: list[Op]) -> Operation:
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                found = yield from self._find(op.namespace, op.key)
                if found and op.refresh_ttl:
                    yield from self._refresh(found[:1])
                results.append(_item(found[0]) if found else None)
            elif isinstance(op, PutOp):
                yield from self._put(op)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append((yield from self._search(op)))
            elif isinstance(op, ListNamespacesOp):
                results.append((yield from self._list_namespaces(op)))
            else:
                raise ValueError(f"unknown store operation {type(op).__name__}")
        return results

    def _memories(self, user_id: str, **filters) -> Operation:
        """Every semantic memory of the user the key reads (with `filters`), newest first."""
        memories, offset = [], 0
        while True:
            params = {"user_id": user_id, **filters, "limit": PAGE_SIZE, "offset": offset}
            page = yield Call("GET", SEMANTIC, params=params)
            memories.extend(page["results"])
            if not page.get("next") or not page["results"]:
                return memories
            offset += len(page["results"])

    def _items(self, memories: list[dict]) -> Operation:
        """The live store items among the memories; expired ones are deleted on the way (by a key that
        may: one that may not leaves them, hidden, to a key that may)."""
        items, scope = [], None
        for item in map(_envelope, memories):
            if item is None:
                continue
            if not _expired(item):
                items.append(item)
                continue
            scope = scope if scope is not None else (yield from self._write_scope())
            if item["scope"] == scope:
                yield from self._delete(item)
        return items

    def _delete(self, item: dict) -> Operation:
        try:
            yield Call("DELETE", f"{SEMANTIC}{_segment(item['id'])}")
        except NotFoundError:
            pass  # deleted meanwhile by a concurrent delete or put: what was wanted
        except PermissionDeniedError:
            pass  # a read-only key: the expired item stays hidden

    def _refresh(self, items: list[dict]) -> Operation:
        """Reading an item with a TTL starts its TTL again (LangGraph's refresh_on_read)."""
        for item in items:
            if item["ttl"] is None:
                continue
            details = _details(tuple(item["namespace"][1:]), item["key"], item["value"], item["ttl"])
            try:
                yield Call("PATCH", f"{SEMANTIC}{_segment(item['id'])}", json={"details": details})
            except (NotFoundError, PermissionDeniedError):
                pass  # gone meanwhile, or not this key's to refresh

    def _write_scope(self) -> Operation:
        if self._scope is None:
            self._scope = (yield Call("GET", "me"))["write_scope"] or ""
        return self._scope

    def _find(self, namespace: tuple[str, ...], key: str) -> Operation:
        """The memories holding this item, those of the key's write scope first, then the most recently
        changed (one per scope)."""
        user_id, path = namespace[0], tuple(namespace[1:])
        memories = yield from self._memories(user_id, subject=memory_name(path, key))
        items = yield from self._items(memories)
        found = [item for item in items if item["namespace"] == tuple(namespace) and item["key"] == key]
        found.sort(key=lambda item: item["updated_at"], reverse=True)
        if len({item["scope"] for item in found}) > 1:
            scope = yield from self._write_scope()
            found.sort(key=lambda item: item["scope"] != scope)
        return found

    def _put(self, op: PutOp) -> Operation:
        """Writes the item in the key's write scope as one upsert by its key (so concurrent puts of one
        key leave one item), or deletes it there; the same key in another scope the key reads is left
        alone (it is not the key's to change)."""
        if not op.namespace:
            raise ValueError("a namespace names at least the user: (user_id, ...)")
        path = tuple(op.namespace[1:])
        if op.value is None:
            found = yield from self._find(op.namespace, op.key)
            scope = yield from self._write_scope()
            for item in found:
                if item["scope"] == scope:
                    yield from self._delete(item)
            return None
        value = dict(op.value)
        yield Call(
            "POST",
            SEMANTIC,
            json={
                "user_id": op.namespace[0],
                "key": store_key(path, op.key),
                "name": memory_name(path, op.key),
                "summary": summary_text(op.key, value, self.index_fields if op.index is None else op.index),
                "details": _details(path, op.key, value, op.ttl),
                "source": SOURCE,
                "reason": "langgraph store put",
            },
        )
        return None

    def _search(self, op: SearchOp) -> Operation:
        """The items under the prefix that match the filter: ranked by the platform's search for a
        query (its top 100 hits), then, when those do not fill the page, every other match unranked
        (score None), so a filter or an offset never misses an item."""
        prefix = tuple(op.namespace_prefix)
        wanted = op.offset + op.limit

        def matching(items):
            return [
                item
                for item in items
                if item["namespace"][: len(prefix)] == prefix and matches_filter(item["value"], op.filter)
            ]

        def stored_order(items):
            """The reference store's order without a query: namespaces as first written, then keys."""
            first: dict[tuple, str] = {}
            for item in items:
                first[item["namespace"]] = min(first.get(item["namespace"], item["created_at"]), item["created_at"])
            return sorted(items, key=lambda item: (first[item["namespace"]], item["created_at"]))

        if not prefix:
            params = {"query": op.query or "", "memory_types": "semantic", "limit": SEARCH_CANDIDATES}
            hits = (yield Call("GET", "memory/search_all_users", params=params))["results"]
            found = matching((yield from self._items(hits)))
        elif op.query:
            body = {"user_id": prefix[0], "query": op.query, "memory_types": ["semantic"], "limit": SEARCH_CANDIDATES}
            hits = (yield Call("POST", "memory/search", json=body))["results"]
            found = matching((yield from self._items(hits)))
            if len(found) < wanted:
                ranked = {item["id"] for item in found}
                rest = stored_order(matching((yield from self._items((yield from self._memories(prefix[0]))))))
                found += [{**item, "score": None} for item in rest if item["id"] not in ranked]
        else:
            found = stored_order(matching((yield from self._items((yield from self._memories(prefix[0]))))))
        page = found[op.offset : wanted]
        if op.refresh_ttl:
            yield from self._refresh(page)
        return [_item(item, search=True) for item in page]

    def _list_namespaces(self, op: ListNamespacesOp) -> Operation:
        conditions = tuple(op.match_conditions or ())
        users = {
            condition.path[0]
            for condition in conditions
            if condition.match_type == "prefix" and condition.path and condition.path[0] != "*"
        }
        if len(users) != 1:
            raise ValueError(
                "list_namespaces needs the user: a prefix condition whose first label is the user_id "
                "(the platform has no list of a scope's users)"
            )
        items = yield from self._items((yield from self._memories(users.pop())))
        namespaces = set()
        for item in items:
            if not all(_namespace_matches(item["namespace"], c) for c in conditions):
                continue
            namespace = item["namespace"]
            namespaces.add(namespace[: op.max_depth] if op.max_depth is not None else namespace)
        return sorted(namespaces)[op.offset : op.offset + op.limit]

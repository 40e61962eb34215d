"""Search over tool outputs: is a detail that only a tool output holds still found once a turn is embedded
by its bounded head (EMBEDDING_TOOL_OUTPUT_CHARS, EMBEDDING_TURN_MAX_CHARS)?

The 25 tau-bench airline sessions of trial 0 are ingested as one user's task sessions (about 700 turns)
and indexed by the pipeline's own handler with the configured provider (e5 by default). Each query
names an identifier (reservation id, flight number, user id, payment method id) that occurs in exactly
one tool output and in no other turn, with its kind ("reservation 4WQ150", "flight HAT170"); the answer
is that turn. Recall@1/5/10 of `hybrid` (+ the configured reranker) and of `embedding` alone, first with every
turn embedded whole (what main did) and then by its bounded head, split by whether the identifier lies
inside the embedded head or beyond it.

`python -m bench tool_outputs` (BENCH_DATA_DIR for the data; BENCH_TOOL_OUTPUT_QUERIES, default 300).
"""

import os
import random
import re
import uuid
from collections import Counter
from pathlib import Path

from bench.common import Stopwatch, run_pending_tasks, write_result
from bench.data import load

USER = "tau-agent"
KS = (1, 5, 10)
IDENTIFIER = re.compile(
    r"\b(?:[A-Z0-9]{6}|HAT\d{3}|[a-z]+_[a-z]+_\d{3,5}|(?:credit_card|gift_card|certificate)_\d{6,8})\b"
)
KINDS = {"HAT": "flight", "credit_card": "payment method", "gift_card": "payment method", "certificate": "certificate"}


def _kind(identifier: str) -> str:
    for prefix, kind in KINDS.items():
        if identifier.startswith(prefix):
            return kind
    return "user" if "_" in identifier else "reservation"


def _queries(messages, *, limit: int) -> list[tuple[str, object, str]]:
    """(query, the tool turn holding the identifier, identifier) for identifiers of exactly one turn."""
    holders: dict[str, set] = {}
    for message in messages:
        for identifier in set(IDENTIFIER.findall(message.content)):
            if any(character.isdigit() for character in identifier) and any(c.isalpha() for c in identifier):
                holders.setdefault(identifier, set()).add(message)
    single = sorted(
        (identifier, next(iter(turns)))
        for identifier, turns in holders.items()
        if len(turns) == 1 and next(iter(turns)).role == "tool"
    )
    random.Random(7).shuffle(single)
    return [(f"{_kind(identifier)} {identifier}", turn, identifier) for identifier, turn in single[:limit]]


def _recall(client, queries, *, method: str, head_chars: int) -> dict:
    from apps.search.engine import search

    found = {part: Counter() for part in ("all", "in_head", "beyond_head")}
    counts = Counter()
    for query, turn, identifier in queries:
        hits = search(
            reader=client.reader,
            query=query,
            memory_types=["message"],
            method=method,
            limit=max(KS),
            filters={"user_id": USER},
        )
        ranked = [hit.instance.pk for hit in hits]
        part = "in_head" if identifier in turn.content[:head_chars] else "beyond_head"
        counts["all"] += 1
        counts[part] += 1
        for k in KS:
            if turn.pk in ranked[:k]:
                found["all"][k] += 1
                found[part][k] += 1
    return {
        part: {"queries": counts[part], **{f"recall@{k}": round(found[part][k] / counts[part], 3) for k in KS}}
        for part in found
        if counts[part]
    }


def run(output_dir: Path, *, log=print) -> dict:
    from django.conf import settings
    from django.test import override_settings

    from apps.conversations.handlers import messages_embed
    from apps.conversations.management.commands.import_sessions import trajectory_sessions
    from apps.conversations.models import Message
    from apps.conversations.services.ingest import messages_ingest
    from apps.providers.embeddings import embedding_model_name
    from apps.tenancy.models import Organization
    from apps.tenancy.services import client_create, organization_create

    limit = int(os.environ.get("BENCH_TOOL_OUTPUT_QUERIES", "300"))
    sessions = [item for item in trajectory_sessions(load("tau-airline-dev.json")) if item["session_id"].endswith("-0")]
    organization = organization_create(name=f"bench-tool-outputs-{uuid.uuid4().hex[:8]}")
    client, _ = client_create(organization=organization, name="bench", write_scope="bench")
    bounded = {"tool": settings.EMBEDDING_TOOL_OUTPUT_CHARS, "turn": settings.EMBEDDING_TURN_MAX_CHARS}
    result = {"benchmark": "tool_outputs", "provider": embedding_model_name(), "sessions": len(sessions)}
    try:
        whole = override_settings(EMBEDDING_TOOL_OUTPUT_CHARS=10**9, EMBEDDING_TURN_MAX_CHARS=10**9)
        with whole:
            for item in sessions:
                messages_ingest(
                    client=client,
                    user_id=USER,
                    session_id=item["session_id"],
                    messages=item["messages"],
                    session_tag="task",
                    seal=True,
                    outcome=item["outcome"],
                )
            with Stopwatch() as watch:
                run_pending_tasks(organization, task_types=["embed_messages"])
        messages = list(Message.objects.filter(organization=organization).order_by("session_id", "seq"))
        queries = _queries(messages, limit=limit)
        result.update(turns=len(messages), queries=len(queries), whole_embedding_seconds=round(watch.seconds, 1))
        log(f"tool_outputs: {len(messages)} turns, {len(queries)} queries; embedded whole in {watch.seconds:.0f}s")
        for label, embedding in (("whole", whole), ("bounded", override_settings())):
            with embedding:
                if label == "bounded":
                    changed = [m for m in messages if m.embedding_text() != _whole_text(m)]
                    with Stopwatch() as watch:
                        messages_embed(changed, model=embedding_model_name())
                    result["bounded_reembedded_turns"] = len(changed)
                    result["bounded_reembed_seconds"] = round(watch.seconds, 1)
                result[label] = {
                    method: _recall(client, queries, method=method, head_chars=bounded["tool"])
                    for method in ("hybrid", "embedding", "bm25")
                }
            log(
                f"tool_outputs: {label}: hybrid {result[label]['hybrid']['all']}, embedding {result[label]['embedding']['all']}"
            )
        result["settings"] = {
            "EMBEDDING_TOOL_OUTPUT_CHARS": bounded["tool"],
            "EMBEDDING_TURN_MAX_CHARS": bounded["turn"],
        }
    finally:
        Organization.objects.filter(pk=organization.pk).delete()
    write_result(output_dir, "tool_outputs", result)
    return result


def _whole_text(message) -> str:
    """main's embedding text: the whole turn."""
    if message.name and message.role != "tool":
        return f"{message.name}: {message.content}"
    return message.content

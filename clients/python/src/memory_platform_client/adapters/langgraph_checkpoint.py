"""LangGraph's `BaseCheckpointSaver` on the platform (`pip install 'memory-platform-client[langgraph]'`):
a graph's short-term memory (its state after each step, per thread) kept by the platform, and the
thread's `messages` copied into the user's session turns, so they are searched, shown in
`memory/context` and learned from like any conversation.

Where things go. Each checkpoint is stored whole (`POST checkpoints/`: the checkpoint as LangGraph's
serializer wrote it, its metadata, later its tasks' pending writes), in the key's write scope, per
user and thread: a resumed graph gets back exactly what it saved, whatever the platform's retention
later prunes from the turns. The messages of the `messages` channel are also turns of the session
named after the thread (`session_key`: the thread id when it is a valid session id, else a slug and
its hash; a sealed session continues as `<id>--2`…): the platform answers which message ids no earlier checkpoint
of the thread held, and only those are added, so each message is one turn however many checkpoints
repeat it. Copying them is additive: a failure there never fails the checkpoint.

The skill loop: with `session_tag="task"`, `finish(config, outcome=..., applied=[skill ids])` ends a
run (outcome, applied skills, seal) so the platform learns a skill from it; put what was learned into
the prompt with `skill_loop.SkillLoop(...).prompt(...)` (examples/langgraph_agent.py).

Reads cover the key's read scopes; writes and `delete_thread` its write scope. Erasing the user erases
the checkpoints. Base capabilities only (`put`, `put_writes`, `get_tuple`, `list`, `delete_thread`);
`copy_thread`, `prune` and `delete_for_runs` are LangGraph's defaults (not implemented)."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)

from memory_platform_client._http import Call
from memory_platform_client._http import Op as Operation
from memory_platform_client.adapters._transcript import Transcript, session_key
from memory_platform_client.adapters.langchain_history import message_to_turn
from memory_platform_client.adapters.skill_loop import close_task, resolve_outcome
from memory_platform_client.client import PAGE_SIZE, AsyncMemoryClient, MemoryClient
from memory_platform_client.errors import MemoryPlatformError

logger = logging.getLogger(__name__)

CHECKPOINTS = "checkpoints/"
MESSAGES_CHANNEL = "messages"


def _message_id(message: BaseMessage) -> str:
    """LangGraph's `add_messages` gives every message an id; one without is named by its content."""
    if message.id:
        return str(message.id)
    return "content-" + hashlib.sha256(json.dumps(message.model_dump(), default=str).encode()).hexdigest()


class PlatformCheckpointer(BaseCheckpointSaver):
    """`PlatformCheckpointer(client=MemoryClient(...), async_client=AsyncMemoryClient(...), user_id=...)`
    (either client for only the blocking or only the async methods), then `graph.compile(checkpointer=...)`.
    `copy_messages=False` keeps the messages in the checkpoints only; `session_tag="task"` files the
    thread's turns as a task run, for skill distillation."""

    def __init__(
        self,
        *,
        client: MemoryClient | None = None,
        async_client: AsyncMemoryClient | None = None,
        user_id: str,
        session_tag: str = "conversation",
        copy_messages: bool = True,
        serde=None,
    ):
        if client is None and async_client is None:
            raise ValueError("pass client= (a MemoryClient), async_client= (an AsyncMemoryClient) or both")
        super().__init__(serde=serde)
        self.client = client
        self.async_client = async_client
        self.user_id = user_id
        self.session_tag = session_tag
        self.copy_messages = copy_messages

    def _run(self, op: Operation) -> Any:
        if self.client is None:
            raise RuntimeError("this checkpointer has no blocking client: pass client=MemoryClient(...)")
        return self.client._driver.run(op)

    async def _arun(self, op: Operation) -> Any:
        if self.async_client is None:
            raise RuntimeError("this checkpointer has no async client: pass async_client=AsyncMemoryClient(...)")
        return await self.async_client._driver.run(op)

    # The serialised form: LangGraph's serializer gives (type, bytes); JSON carries the bytes as base64.

    def _dump(self, value: Any) -> dict:
        kind, data = self.serde.dumps_typed(value)
        return {"type": kind, "data": base64.b64encode(data).decode()}

    def _load(self, stored: dict) -> Any:
        return self.serde.loads_typed((stored["type"], base64.b64decode(stored["data"])))

    def _tuple(self, row: dict) -> CheckpointTuple:
        configurable = {
            "thread_id": row["thread_id"],
            "checkpoint_ns": row["checkpoint_ns"],
            "checkpoint_id": row["checkpoint_id"],
        }
        parent = None
        if row["parent_checkpoint_id"]:
            parent = {"configurable": {**configurable, "checkpoint_id": row["parent_checkpoint_id"]}}
        writes = sorted(row["writes"], key=lambda write: (write["task_id"], write["idx"]))
        return CheckpointTuple(
            config={"configurable": configurable},
            checkpoint=self._load(row["checkpoint"]),
            metadata=row["metadata"],
            parent_config=parent,
            pending_writes=[(write["task_id"], write["channel"], self._load(write["value"])) for write in writes],
        )

    # The operations, written once as SDK operations (generators of calls) that either client runs.

    def _list(self, config: RunnableConfig | None, *, filter, before, limit) -> Operation:
        params: dict[str, Any] = {"user_id": self.user_id}
        configurable = (config or {}).get("configurable", {})
        for name in ("thread_id", "checkpoint_ns", "checkpoint_id"):
            if configurable.get(name) is not None:
                params[name] = configurable[name]
        if before is not None:
            params["before"] = get_checkpoint_id(before)
        if filter:
            params["metadata"] = json.dumps(filter)
        rows, offset = [], 0
        while limit is None or len(rows) < limit:
            wanted = PAGE_SIZE if limit is None else min(PAGE_SIZE, limit - len(rows))
            page = yield Call("GET", CHECKPOINTS, params={**params, "limit": wanted, "offset": offset})
            rows.extend(page["results"])
            if not page.get("next") or not page["results"]:
                break
            offset += len(page["results"])
        return rows

    def _get(self, config: RunnableConfig) -> Operation:
        configurable = config["configurable"]
        query = {
            "thread_id": configurable["thread_id"],
            "checkpoint_ns": configurable.get("checkpoint_ns", ""),
        }
        if get_checkpoint_id(config):
            query["checkpoint_id"] = get_checkpoint_id(config)
        rows = yield from self._list({"configurable": query}, filter=None, before=None, limit=1)
        return self._tuple(rows[0]) if rows else None

    def _put(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, new_versions
    ) -> Operation:
        configurable = config["configurable"]
        thread_id, checkpoint_ns = configurable["thread_id"], configurable.get("checkpoint_ns", "")
        messages = []
        if self.copy_messages and MESSAGES_CHANNEL in new_versions:
            found = checkpoint["channel_values"].get(MESSAGES_CHANNEL)
            if isinstance(found, list):
                messages = [message for message in found if isinstance(message, BaseMessage)]
        ids = [_message_id(message) for message in messages]
        answer = yield Call(
            "POST",
            CHECKPOINTS,
            json={
                "user_id": self.user_id,
                "thread_id": thread_id,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint["id"],
                "parent_checkpoint_id": configurable.get("checkpoint_id") or "",
                "checkpoint": self._dump(checkpoint),
                "metadata": get_checkpoint_metadata(config, metadata),
                "message_ids": ids,
            },
        )
        new = set(answer["new_message_ids"])
        turns = [message_to_turn(message) for message, id_ in zip(messages, ids) if id_ in new]
        if turns:
            try:
                yield from self._transcript(thread_id).add(turns)
            except MemoryPlatformError as error:
                logger.warning(
                    "checkpoint %s kept; its messages were not copied into turns: %s", checkpoint["id"], error
                )
        return {
            "configurable": {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns, "checkpoint_id": checkpoint["id"]}
        }

    def _put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str
    ) -> Operation:
        configurable = config["configurable"]
        body = {
            "user_id": self.user_id,
            "thread_id": configurable["thread_id"],
            "checkpoint_ns": configurable.get("checkpoint_ns", ""),
            "checkpoint_id": configurable["checkpoint_id"],
            "task_id": task_id,
            "task_path": task_path,
            "writes": [
                {"idx": WRITES_IDX_MAP.get(channel, index), "channel": channel, "value": self._dump(value)}
                for index, (channel, value) in enumerate(writes)
            ],
        }
        if body["writes"]:
            yield Call("POST", f"{CHECKPOINTS}writes", json=body)
        return None

    def _transcript(self, thread_id: str) -> Transcript:
        return Transcript(user_id=self.user_id, session_id=session_key(thread_id), session_tag=self.session_tag)

    def _finish(self, config: RunnableConfig, outcome, applied) -> Operation:
        if callable(outcome):
            latest = yield from self._get(config)
            outcome = resolve_outcome(outcome, latest.checkpoint["channel_values"] if latest else {})
        transcript = self._transcript(config["configurable"]["thread_id"])
        return (yield from close_task(transcript, outcome=outcome, applied=list(applied)))

    def _delete_thread(self, thread_id: str) -> Operation:
        yield Call("DELETE", CHECKPOINTS, params={"user_id": self.user_id, "thread_id": thread_id})
        return None

    # BaseCheckpointSaver's methods, blocking and async.

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._run(self._get(config))

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._arun(self._get(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        for row in self._run(self._list(config, filter=filter, before=before, limit=limit)):
            yield self._tuple(row)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        for row in await self._arun(self._list(config, filter=filter, before=before, limit=limit)):
            yield self._tuple(row)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self._run(self._put(config, checkpoint, metadata, new_versions))

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await self._arun(self._put(config, checkpoint, metadata, new_versions))

    def put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        self._run(self._put_writes(config, writes, task_id, task_path))

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        await self._arun(self._put_writes(config, writes, task_id, task_path))

    def finish(self, config: RunnableConfig, *, outcome=None, applied=()) -> dict | None:
        """Closes the skill loop for a task thread's run (`session_tag="task"`): marks the served skills
        it `applied` (their ids), sets its `outcome` ("success", "failure", "unknown", or a callable given
        the thread's latest state: True/False/None) and seals its session, so the platform distils it.
        The thread's next messages open the next session of its chain → the seal's answer."""
        return self._run(self._finish(config, outcome, applied))

    async def afinish(self, config: RunnableConfig, *, outcome=None, applied=()) -> dict | None:
        return await self._arun(self._finish(config, outcome, applied))

    def delete_thread(self, thread_id: str) -> None:
        self._run(self._delete_thread(thread_id))

    async def adelete_thread(self, thread_id: str) -> None:
        await self._arun(self._delete_thread(thread_id))

"""One conversation of a framework (an Agents SDK session, a LangChain history) kept as platform
session turns, written once as SDK operations (generators of `Call`s) that either client runs.

The platform seals a session after `SESSION_IDLE_SECONDS` without turns, or when the same user opens
a newer session of the same tag in the same scope, and a sealed session takes no more turns (409).
A framework's conversation outlives both, so it is a chain of platform sessions: `<id>`, then
`<id>--2`, `<id>--3`…, each opened when the one before it is sealed. Its history is their turns in
order. The chain is found by reading `<id>`, `<id>--2`… until one is missing."""

from __future__ import annotations

import re
import uuid
from typing import Any

from memory_platform_client._http import Call, Op
from memory_platform_client.client import TRANSCRIPT_PAGE_SIZE, _segment, _wait
from memory_platform_client.errors import ConflictError, MemoryPlatformError, NotFoundError
from memory_platform_client.messages import to_messages

SEGMENT_SEPARATOR = "--"
CLEAR_POLL_SECONDS = 0.2
SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{1,56}$")


def check_session_id(session_id: str) -> str:
    """The platform's session ids are 1-64 of [A-Za-z0-9_-]; 8 are kept for the chain's suffix."""
    if not isinstance(session_id, str) or not SESSION_ID.match(session_id):
        raise ValueError(f"session_id must be 1-56 letters, digits, '_' or '-', not {session_id!r}")
    return session_id


def segment_id(base: str, number: int) -> str:
    return base if number == 1 else f"{base}{SEGMENT_SEPARATOR}{number}"


class Transcript:
    """One user's conversation `session_id` in the platform, in the key's write scope."""

    def __init__(self, *, user_id: str, session_id: str, session_tag: str = "conversation"):
        self.user_id = user_id
        self.session_id = check_session_id(session_id)
        self.session_tag = session_tag

    def _path(self, number: int) -> str:
        return f"sessions/{_segment(segment_id(self.session_id, number))}/"

    def _session(self, number: int, *, limit: int | None = None, offset: int = 0) -> Op:
        """One platform session with its turns (every turn without `limit`), or None when missing."""
        params = {"user_id": self.user_id, "limit": limit or TRANSCRIPT_PAGE_SIZE, "offset": offset}
        try:
            session = yield Call("GET", self._path(number), params=params)
        except NotFoundError:
            return None
        while limit is None and session.get("messages_next_offset") is not None:
            page = yield Call("GET", self._path(number), params={**params, "offset": session["messages_next_offset"]})
            session["messages"].extend(page["messages"])
            session["messages_next_offset"] = page.get("messages_next_offset")
        return session

    def segments(self) -> Op:
        """The chain's platform sessions, first to last, without their turns."""
        found, number = [], 1
        while True:
            session = yield from self._session(number, limit=1)
            if session is None:
                return found
            found.append({**session, "number": number})
            number += 1

    def turns(self, limit: int | None = None) -> Op:
        """The conversation's turns in order: all, or the latest `limit`."""
        segments = yield from self.segments()
        collected: list[dict] = []
        for segment in reversed(segments):
            wanted = None if limit is None else limit - len(collected)
            if wanted is not None and wanted <= 0:
                break
            offset = 0 if wanted is None else max(0, segment["message_count"] - wanted)
            session = yield from self._session(segment["number"], offset=offset)
            if session is not None:
                collected[:0] = session["messages"]
        return collected if limit is None else collected[max(0, len(collected) - limit) :]

    def add(self, messages: list[Any]) -> Op:
        """Appends turns to the chain's last session, or opens the next one when it is sealed."""
        if not messages:
            return None
        segments = yield from self.segments()
        number = segments[-1]["number"] if segments else 1
        if segments and segments[-1]["status"] == "sealed":
            number += 1
        body = {
            "user_id": self.user_id,
            "messages": to_messages(messages),
            "session_tag": self.session_tag,
        }
        key = f"sdk-{uuid.uuid4().hex}"
        while True:
            try:
                return (
                    yield Call(
                        "POST",
                        "memory/add",
                        json={**body, "session_id": segment_id(self.session_id, number)},
                        headers={"Idempotency-Key": f"{key}-{number}"},
                    )
                )
            except ConflictError as error:
                # Sealed between our read and our add (or still being deleted): the next one.
                if error.code != "conflict" or number > len(segments) + 2:
                    raise
                number += 1

    def pop(self) -> Op:
        """Deletes the conversation's latest turn and returns it, or None when there is none."""
        segments = yield from self.segments()
        for segment in reversed(segments):
            if not segment["message_count"]:
                continue
            session = yield from self._session(segment["number"], limit=1, offset=segment["message_count"] - 1)
            if session and session["messages"]:
                turn = session["messages"][-1]
                yield Call("DELETE", f"memory/message/{_segment(turn['id'])}")
                return turn
        return None

    def clear(self, timeout: float) -> Op:
        """Deletes every session of the chain and what was learned from them, and waits (at most
        `timeout` seconds each) until the platform's background purge is done: the platform still
        takes turns under a session id whose purge is queued, and the purge deletes them too."""
        segments = yield from self.segments()
        task_ids = []
        for segment in segments:
            try:
                deletion = yield Call("DELETE", self._path(segment["number"]), params={"user_id": self.user_id})
            except NotFoundError:
                continue
            task_ids.append(deletion["task_id"])
        for task_id in task_ids:
            task = yield from _wait(task_id, timeout, CLEAR_POLL_SECONDS)
            if task["status"] != "succeeded":
                raise MemoryPlatformError(f"deleting session {self.session_id} ended {task['status']} (task {task_id})")
        return None

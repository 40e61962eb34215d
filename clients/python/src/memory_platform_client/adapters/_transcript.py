"""One conversation of a framework (an Agents SDK session, a LangChain history) kept as platform
session turns, written once as SDK operations (generators of `Call`s) that either client runs.

The platform seals a session after `SESSION_IDLE_SECONDS` without turns, or when the same user opens
a newer session of the same tag in the same scope, and a sealed session takes no more turns (409).
A framework's conversation outlives both, so it is a chain of platform sessions: `<id>`, then
`<id>--2`, `<id>--3`…, each opened when the one before it is sealed. Its history is their turns in
order. The chain is found by reading `<id>`, `<id>--2`… until one is missing."""

from __future__ import annotations

import hashlib
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


SLUG_CHARS = 31
DIGEST_CHARS = 24  # 96 bits of SHA-256


def session_key(session_id: str) -> str:
    """The platform session id for a framework's session id (any non-empty string).

    The platform's session ids are 1-64 of `[A-Za-z0-9_-]`, 8 of them kept for the chain's suffix. An
    id that is already 1-56 of those is kept as it is. Any other ("chat 42", an email, 60+ characters)
    becomes `<slug>_<digest>`: its first 31 letters and digits (other runs of characters as one '-') and
    24 hex digits of its SHA-256, so two ids collide only if SHA-256 does (96 bits), or if a caller
    passes the mapped form of another id as an id itself. The same id always maps to the same key."""
    if not isinstance(session_id, str) or not session_id:
        raise ValueError(f"session_id must be a non-empty string, not {session_id!r}")
    if SESSION_ID.match(session_id):
        return session_id
    slug = re.sub(r"[^A-Za-z0-9]+", "-", session_id).strip("-")[:SLUG_CHARS].strip("-")
    digest = hashlib.sha256(session_id.encode()).hexdigest()[:DIGEST_CHARS]
    return f"{slug}_{digest}" if slug else digest


class Transcript:
    """One user's conversation `session_id` (any string, kept in the platform as `session_key(session_id)`)
    in the key's write scope."""

    def __init__(self, *, user_id: str, session_id: str, session_tag: str = "conversation"):
        self.user_id = user_id
        self.session_id = session_key(session_id)
        self.session_tag = session_tag

    def segment_id(self, number: int) -> str:
        """The platform session id of the chain's `number`th session."""
        return self.session_id if number == 1 else f"{self.session_id}{SEGMENT_SEPARATOR}{number}"

    def number_of(self, segment_id: str) -> int:
        suffix = segment_id[len(self.session_id) + len(SEGMENT_SEPARATOR) :]
        return int(suffix) if segment_id != self.session_id else 1

    def _path(self, number: int) -> str:
        return f"sessions/{_segment(self.segment_id(number))}/"

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

    def add(self, messages: list[Any], *, number: int | None = None) -> Op:
        """Appends turns to the chain's last session (or to session `number`, when the caller knows it),
        or opens the next one when it is sealed → the `memory/add` answer."""
        if not messages:
            return None
        if number is None:
            segments = yield from self.segments()
            number = segments[-1]["number"] if segments else 1
            if segments and segments[-1]["status"] == "sealed":
                number += 1
            last = len(segments)
        else:
            last = number
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
                        json={**body, "session_id": self.segment_id(number)},
                        headers={"Idempotency-Key": f"{key}-{number}"},
                    )
                )
            except ConflictError as error:
                # Sealed between our read and our add (or still being deleted): the next one.
                if error.code != "conflict" or number > last + 2:
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

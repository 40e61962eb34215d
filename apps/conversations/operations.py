"""The conversation endpoints' operations (REST: apps.conversations.views; MCP: apps.mcp_server)."""

from django.db import transaction

from apps.conversations import selectors, serializers
from apps.conversations.services.checkpoints import (
    checkpoint_put,
    checkpoint_thread_delete,
    checkpoint_writes_put,
)
from apps.conversations.services.ingest import messages_ingest, request_fingerprint
from apps.conversations.services.sessions import (
    session_delete_request,
    session_retag,
    session_seal_now,
    session_set_outcome,
)
from apps.core.errors import InvalidInput
from apps.core.operations import Access, check_ids, operation, require_write_access, validated
from apps.core.pagination import Page, paginated_read

MAX_IDEMPOTENCY_KEY = 255


@operation(access=Access.WRITE)
def add_memory(*, client, data, idempotency_key: str | None = None) -> dict:
    """Add turns of one session to memory.

    Stores OpenAI chat-format messages as turns of the session (opened on first use, unique per
    user and scope) and queues the background work its `session_tag` calls for, in one transaction:
    extraction of episodic and semantic memories for a conversation, skill distillation for a task
    once sealed. With an `Idempotency-Key` header, a replay answers the first response."""
    if idempotency_key and len(idempotency_key) > MAX_IDEMPOTENCY_KEY:
        raise InvalidInput({"Idempotency-Key": [f"At most {MAX_IDEMPOTENCY_KEY} characters."]})
    add = validated(serializers.MemoryAddInputSerializer, data)
    ingested = messages_ingest(
        client=client,
        **add,
        idempotency_key=idempotency_key or None,
        request_hash=request_fingerprint(data) if idempotency_key else None,
    )
    return serializers.MemoryAddOutputSerializer(ingested).data


@operation()
def list_sessions(*, client, query) -> Page:
    """List sessions, most recent first, in the caller's read scopes."""
    return paginated_read(
        client,
        query,
        filters=serializers.SessionListFilterSerializer,
        select=selectors.session_list,
        output=serializers.SessionOutputSerializer,
    )


def session_named(*, client, session_id: str, query) -> tuple:
    """The session a session endpoint names by its id, its owner (`user_id`) and, when the id is in
    several readable scopes, `scope`; with the validated owner query (paging of its transcript)."""
    check_ids(session_id=session_id)
    owner = validated(serializers.OwnerQuerySerializer, query)
    session = selectors.session_get(
        client=client, user_id=owner["user_id"], session_id=session_id, scope=owner.get("scope")
    )
    return session, owner


@operation()
def get_session(*, client, session_id: str, query) -> dict:
    """Read a session with one page of its transcript (turns in order, with ids)."""
    session, owner = session_named(client=client, session_id=session_id, query=query)
    start, end = owner["offset"], owner["offset"] + owner["limit"]
    session.messages_page = selectors.session_messages(session=session)[start:end]
    session.messages_next_offset = end if end < session.message_count else None
    session.indexed_through_seq = selectors.session_indexed_through(session=session)
    return serializers.SessionDetailOutputSerializer(session).data


@operation(access=Access.WRITE)
def seal_session(*, client, session_id: str, query) -> dict:
    """Seal a session now: it takes no more turns, and a task session is queued for distillation."""
    session, _ = session_named(client=client, session_id=session_id, query=query)
    require_write_access(client, session)
    tasks = session_seal_now(session=session, client=client)
    session.refresh_from_db()
    return serializers.SessionSealOutputSerializer({"session": session, "task_ids": [task.pk for task in tasks]}).data


@operation(access=Access.WRITE)
def update_session(*, client, session_id: str, query, data) -> dict:
    """Set a session's outcome, or re-tag it.

    `outcome`: `success`, `failure`, `unknown`. `session_tag` (`task` | `conversation`) may change until
    anything has been learned from the session (409 naming what, after); the work routed by the old tag
    that has not run is cancelled and the new tag's is queued (a sealed task session is distilled)."""
    session, _ = session_named(client=client, session_id=session_id, query=query)
    require_write_access(client, session)
    patch = validated(serializers.SessionPatchInputSerializer, data)
    with transaction.atomic():
        if "session_tag" in patch:
            session = session_retag(session=session, session_tag=patch["session_tag"], client=client)
        if "outcome" in patch:
            session = session_set_outcome(session=session, outcome=patch["outcome"])
    return serializers.SessionOutputSerializer(session).data


@operation(access=Access.WRITE)
def delete_session(*, client, session_id: str, query) -> dict:
    """Delete a whole session and what was derived from its turns.

    Runs in the background (202 with the task's id): the provenance cascade of erasure, for one session."""
    session, _ = session_named(client=client, session_id=session_id, query=query)
    require_write_access(client, session)
    task = session_delete_request(session=session, client=client)
    return serializers.SessionDeleteOutputSerializer(
        {
            "session_id": session.session_id,
            "user_id": session.end_user.user_id,
            "scope": session.scope,
            "task_id": task.pk,
            "status": task.status,
        }
    ).data


@operation(access=Access.WRITE)
def put_checkpoint(*, client, data) -> dict:
    """Store a LangGraph checkpoint of a thread.

    The SDK's `PlatformCheckpointer` keeps a graph's state here, in the client's write scope: the
    checkpoint as LangGraph serialised it (opaque to the platform), its metadata and, later, its tasks'
    pending writes. The same `checkpoint_id` again replaces it. The answer names which `message_ids` no
    earlier checkpoint of the thread held: the SDK copies those messages into session turns, once each."""
    put = validated(serializers.CheckpointPutInputSerializer, data)
    return serializers.CheckpointPutOutputSerializer(checkpoint_put(client=client, **put)).data


@operation(access=Access.WRITE)
def put_checkpoint_writes(*, client, data) -> dict:
    """Store pending writes of a task against a LangGraph checkpoint, in the client's write scope.

    A regular write (`idx` >= 0) already stored for the task is kept as it was; a special channel's
    (negative `idx`) is replaced. The checkpoint may be stored after its writes."""
    put = validated(serializers.CheckpointWritesInputSerializer, data)
    return serializers.CheckpointWritesOutputSerializer({"stored": checkpoint_writes_put(client=client, **put)}).data


@operation()
def list_checkpoints(*, client, query) -> Page:
    """List a user's LangGraph checkpoints, newest first, in the caller's read scopes.

    Filter by `thread_id`, `checkpoint_ns`, `checkpoint_id`, `before` (older than that id) and `metadata`
    (a JSON object the checkpoint's metadata holds)."""
    return paginated_read(
        client,
        query,
        filters=serializers.CheckpointListFilterSerializer,
        select=selectors.checkpoint_list,
        output=serializers.CheckpointOutputSerializer,
    )


@operation(access=Access.WRITE)
def delete_checkpoint_thread(*, client, query) -> dict:
    """Delete every checkpoint of a thread in the client's write scope (every namespace); idempotent."""
    thread = validated(serializers.CheckpointThreadSerializer, query, from_query=True)
    deleted = checkpoint_thread_delete(client=client, **thread)
    return serializers.CheckpointDeleteOutputSerializer({"deleted": deleted}).data

"""The isolation matrix: every endpoint that takes an id, called by every kind of neighbour.

The owner writes and reads scope `alpha` and may erase. Its neighbours: a read-only reader of
`alpha`, a writer of `beta`, a read-only reader of `beta`, a writer of `beta` allowed to erase,
all in the same organisation, and a writer of `alpha` (allowed to erase) in another organisation.
Each answers as EXPECTED says; every refusal is byte-identical to the answer for a missing id, so
an id is never confirmed to exist, and a refused request leaves every row of scope `alpha` as it was.

To add an endpoint, add one entry to ENDPOINTS: (method, a function that creates an object owned
by the given client and returns the URL that addresses it and the same URL with a missing id (and,
for an endpoint that names the object in its body, the body for each), and the expected status for
each role).
"""

import uuid

import pytest

from apps.conversations.models import Message, Session
from apps.memories.models import EpisodicMemory, SemanticMemory
from apps.pipeline.models import MemoryTask
from apps.pipeline.services import task_execute
from apps.portability.models import ExportRequest
from apps.privacy.models import ErasureRequest
from apps.profiles.models import Entity, Profile
from apps.skills.models import Skill, SkillExperience, SkillFeedback, SkillUse, SkillWithheld
from apps.tenancy.models import Client, ClientAPIKey
from apps.webhooks.models import WebhookDelivery, WebhookEndpoint
from tests.conftest import api_for
from tests.factories import ClientFactory

ROLES = ("owner", "alpha_reader", "beta_writer", "beta_reader", "beta_eraser", "foreign")


@pytest.fixture
def neighbours(organization):
    def client(name, write_scope, read_scopes, can_erase=False, organization=organization):
        return ClientFactory(
            organization=organization,
            name=name,
            write_scope=write_scope,
            read_scopes=read_scopes,
            can_erase=can_erase,
            can_export=can_erase,  # the erasers may also export
            can_manage_webhooks=can_erase,  # and manage webhooks
        )

    return {
        "owner": client("owner", "alpha", ["alpha"], can_erase=True),
        "alpha_reader": client("alpha-reader", None, ["alpha"]),
        "beta_writer": client("beta-writer", "beta", ["beta"]),
        "beta_reader": client("beta-reader", None, ["beta"]),
        "beta_eraser": client("beta-eraser", "beta", ["beta"], can_erase=True),
        "foreign": ClientFactory(
            name="foreign",
            write_scope="alpha",
            read_scopes=["alpha"],
            can_erase=True,
            can_export=True,
            can_manage_webhooks=True,
        ),
    }


def _session_url(client, add, suffix=""):
    add(client, user_id="owner", session_id="sess-x")
    return (
        f"/api/v1/sessions/sess-x/{suffix}?user_id=owner",
        f"/api/v1/sessions/sess-{uuid.uuid4().hex[:8]}/{suffix}?user_id=owner",
    )


def _distill_url(client, add):
    add(client, user_id="owner", session_id="sess-d", session_tag="task", seal=True)
    return (
        "/api/v1/sessions/sess-d/distill?user_id=owner",
        f"/api/v1/sessions/sess-{uuid.uuid4().hex[:8]}/distill?user_id=owner",
    )


def _message_url(client, add):
    add(client, user_id="owner", session_id="sess-m")
    message = Message.objects.filter(session__organization=client.organization, session__session_id="sess-m").first()
    return f"/api/v1/memory/message/{message.pk}", f"/api/v1/memory/message/{uuid.uuid4()}"


def _task_url(client, add):
    task_id = add(client, user_id="owner", session_id="sess-t")["task_ids"][0]
    return f"/api/v1/tasks/{task_id}/", f"/api/v1/tasks/{uuid.uuid4()}/"


def _skill_url(template="/api/v1/skills/{}/"):
    def make(client, add):
        from tests.skills.factories import SkillFactory

        skill = SkillFactory(organization=client.organization, scope=client.write_scope)
        return template.format(skill.pk), template.format(uuid.uuid4())

    return make


def _skill_feedback(client, add):
    from tests.skills.factories import SkillFactory

    skill = SkillFactory(organization=client.organization, scope=client.write_scope)
    add(client, user_id="owner", session_id="sess-f", session_tag="task", seal=True)  # the verdict's session
    body = {"user_id": "owner", "session_id": "sess-f", "verdict": "hurt", "reason": "It skipped a step."}
    return f"/api/v1/skills/{skill.pk}/feedback", f"/api/v1/skills/{uuid.uuid4()}/feedback", body, body


def _skill_uses(client, add):
    from apps.tenancy.services import end_user_get_or_create
    from tests.skills.factories import SkillFactory

    skill = SkillFactory(organization=client.organization, scope=client.write_scope)
    SkillUse.objects.create(
        organization=client.organization,
        scope=skill.scope,
        skill=skill,
        version=skill.version,
        rank=1,
        score=0.1,
        client=client,
        end_user=end_user_get_or_create(organization=client.organization, user_id="owner"),
        session_scope=client.write_scope,
        session_id="sess-u",
    )
    body = {"user_id": "owner", "session_id": "sess-u"}
    return f"/api/v1/skills/{skill.pk}/uses", f"/api/v1/skills/{uuid.uuid4()}/uses", body, body


def _memory_url(memory_type, suffix=""):
    def make(client, add):
        from tests.memories.makers import MAKERS

        memory = MAKERS[memory_type](client, "owner", f"{memory_type} memory of {client.name}")
        return (
            f"/api/v1/memory/{memory_type}/{memory.pk}{suffix}",
            f"/api/v1/memory/{memory_type}/{uuid.uuid4()}{suffix}",
        )

    return make


def _memory_patch(memory_type):
    def make(client, add):
        url, missing_url = _memory_url(memory_type)(client, add)
        body = {"summary": "corrected"}
        return url, missing_url, body, body

    return make


def _context(client, add):
    add(client, user_id="owner", session_id="sess-c")
    body = {"user_id": "owner", "session_id": "sess-c", "query": "hello"}
    return (
        "/api/v1/memory/context",
        "/api/v1/memory/context",
        body,
        {**body, "session_id": f"sess-{uuid.uuid4().hex[:8]}"},
    )


def _consolidate(client, add):
    from tests.memories.makers import make_semantic

    make_semantic(client, "owner", f"a fact of {client.name}")
    missing = f"owner-{uuid.uuid4().hex[:8]}"
    return "/api/v1/memory/consolidate", "/api/v1/memory/consolidate", {"user_id": "owner"}, {"user_id": missing}


def _experience_url(client, add):
    from tests.skills.makers import make_experience

    experience = make_experience(client, "owner", f"lesson of {client.name}")
    return f"/api/v1/experiences/{experience.pk}/", f"/api/v1/experiences/{uuid.uuid4()}/"


def _entity_url(client, add):
    from tests.profiles.makers import make_profile

    entity_id = make_profile(client, "owner", f"profile page of {client.name}").entity_id
    return f"/api/v1/entities/{entity_id}/", f"/api/v1/entities/{uuid.uuid4()}/"


def _profile_url(client, add, suffix=""):
    from tests.profiles.makers import make_profile

    profile = make_profile(client, "owner", f"profile page of {client.name}")
    return f"/api/v1/profiles/{profile.pk}/{suffix}", f"/api/v1/profiles/{uuid.uuid4()}/{suffix}"


def _topic_compile_url(client, add):
    add(client, user_id="topics-of", session_id="sess-t")
    body = {"user_id": "topics-of"}
    return "/api/v1/topics/compile", "/api/v1/topics/compile", body, {"user_id": f"topics-{uuid.uuid4().hex[:8]}"}


def _user_erasure_url(client, add):
    add(client, user_id="erase-me", session_id="sess-e")
    return "/api/v1/users/erase-me/memories", f"/api/v1/users/erase-{uuid.uuid4().hex[:8]}/memories"


def _client_erasure_url(client, add):
    target = ClientFactory(organization=client.organization, write_scope=client.write_scope)
    return f"/api/v1/clients/{target.pk}/memories", f"/api/v1/clients/{uuid.uuid4()}/memories"


def _erasure(client, add) -> ErasureRequest:
    from apps.privacy.services.erasure import erasure_request
    from apps.privacy.services.subjects import subject_resolve

    add(client, user_id="erased", session_id="sess-r")
    return erasure_request(
        subject=subject_resolve(organization=client.organization, kind="user", subject_id="erased"), requested_by=client
    )


def _erasure_url(client, add):
    return f"/api/v1/erasures/{_erasure(client, add).pk}/", f"/api/v1/erasures/{uuid.uuid4()}/"


def _erasure_task_url(client, add):
    return f"/api/v1/tasks/{_erasure(client, add).task_id}/", f"/api/v1/tasks/{uuid.uuid4()}/"


def _user_export_url(client, add):
    add(client, user_id="export-me", session_id="sess-x")
    return "/api/v1/exports", "/api/v1/exports", {"user_id": "export-me"}, {"user_id": f"export-{uuid.uuid4().hex[:8]}"}


def _client_export_url(client, add):
    target = ClientFactory(organization=client.organization, write_scope=client.write_scope)
    return "/api/v1/exports", "/api/v1/exports", {"client_id": str(target.pk)}, {"client_id": str(uuid.uuid4())}


def _export(client, add) -> ExportRequest:
    from apps.portability.services.requests import export_request

    add(client, user_id="exported", session_id="sess-x")
    export = export_request(client=client, selection="user", value="exported")
    task_execute(task_id=export.task_id, worker="test")
    return export


def _export_url(suffix=""):
    def make(client, add):
        return f"/api/v1/exports/{_export(client, add).pk}{suffix}", f"/api/v1/exports/{uuid.uuid4()}{suffix}"

    return make


def _export_task_url(client, add):
    return f"/api/v1/tasks/{_export(client, add).task_id}/", f"/api/v1/tasks/{uuid.uuid4()}/"


def _webhook_url(suffix="", body=None):
    def make(client, add):
        from apps.webhooks.services import endpoint_create

        endpoint, _ = endpoint_create(
            organization=client.organization,
            registered_by=client,
            url="https://hooks.example.com/x",
            events=["skill.evolved"],
        )
        urls = f"/api/v1/webhooks/{endpoint.pk}{suffix}", f"/api/v1/webhooks/{uuid.uuid4()}{suffix}"
        return urls if body is None else (*urls, body, body)

    return make


def expect(owner, alpha_reader, beta_writer, beta_reader, beta_eraser, foreign) -> dict:
    return dict(zip(ROLES, (owner, alpha_reader, beta_writer, beta_reader, beta_eraser, foreign)))


# Read: whoever reads scope alpha. Write: the alpha writer; read-only clients are refused (403)
# before any lookup. Erase: whoever may erase, in its organisation; others are refused before any
# lookup. Erasures and their tasks span every scope: the requester and clients allowed to erase.
READ = expect(200, 200, 404, 404, 404, 404)
WRITE = expect(200, 403, 404, 403, 404, 404)
DELETE = expect(204, 403, 404, 403, 404, 404)
ERASE = expect(202, 403, 403, 403, 202, 404)
ERASURE_STATUS = expect(200, 404, 404, 404, 200, 404)
# Exports: like erasure, a permission of its own (can_export, held here by the erasers) that spans
# every scope; an export, its archive and its task are the requester's alone (unlike an erasure's
# task, an export's is not seen by clients allowed to erase).
EXPORT = expect(202, 403, 403, 403, 202, 404)
EXPORT_STATUS = expect(200, 403, 403, 403, 404, 404)
EXPORT_TASK = expect(200, 404, 404, 404, 404, 404)
# Webhooks: a permission of their own (can_manage_webhooks, held here by the erasers); an endpoint
# hears every scope's events, so it is the organisation's and every client allowed to manage sees it.
WEBHOOKS = expect(200, 403, 403, 403, 200, 404)

ENDPOINTS = {
    "session-get": ("get", _session_url, READ),
    "session-patch": ("patch", _session_url, WRITE),
    "session-seal": ("post", lambda client, add: _session_url(client, add, "seal"), WRITE),
    "session-distill": ("post", _distill_url, expect(202, 403, 404, 403, 404, 404)),
    "message-delete": ("delete", _message_url, DELETE),
    "task-get": ("get", _task_url, READ),
    "skill-get": ("get", _skill_url(), READ),
    "skill-delete": ("delete", _skill_url(), DELETE),
    "skill-feedback": ("post", _skill_feedback, expect(201, 403, 404, 403, 404, 404)),
    "skill-uses": ("post", _skill_uses, WRITE),
    "procedural-delete": ("delete", _skill_url("/api/v1/memory/procedural/{}"), DELETE),
    "episodic-delete": ("delete", _memory_url("episodic"), DELETE),
    "semantic-delete": ("delete", _memory_url("semantic"), DELETE),
    "profile-get": ("get", _profile_url, READ),
    "context-session": ("post", _context, READ),
    "memory-consolidate": ("post", _consolidate, expect(202, 403, 404, 403, 404, 404)),
    "episodic-get": ("get", _memory_url("episodic"), READ),
    "semantic-get": ("get", _memory_url("semantic"), READ),
    "episodic-patch": ("patch", _memory_patch("episodic"), WRITE),
    "semantic-patch": ("patch", _memory_patch("semantic"), WRITE),
    "episodic-history": ("get", _memory_url("episodic", "/history"), READ),
    "semantic-history": ("get", _memory_url("semantic", "/history"), READ),
    "session-delete": ("delete", _session_url, expect(202, 403, 404, 403, 404, 404)),
    "experience-delete": ("delete", _experience_url, DELETE),
    "profile-delete": ("delete", _profile_url, DELETE),
    "profile-findings": ("get", lambda client, add: _profile_url(client, add, "findings"), READ),
    "profile-lint": ("post", lambda client, add: _profile_url(client, add, "lint"), WRITE),
    "topic-compile": ("post", _topic_compile_url, expect(202, 403, 404, 403, 404, 404)),
    "entity-delete": ("delete", _entity_url, DELETE),
    "user-erasure": ("delete", _user_erasure_url, ERASE),
    "client-erasure": ("delete", _client_erasure_url, ERASE),
    "erasure-get": ("get", _erasure_url, ERASURE_STATUS),
    "erasure-task-get": ("get", _erasure_task_url, ERASURE_STATUS),
    "user-export": ("post", _user_export_url, EXPORT),
    "client-export": ("post", _client_export_url, EXPORT),
    "export-get": ("get", _export_url(), EXPORT_STATUS),
    "export-download": ("get", _export_url("/download"), EXPORT_STATUS),
    "export-task-get": ("get", _export_task_url, EXPORT_TASK),
    "webhook-get": ("get", _webhook_url("/"), WEBHOOKS),
    "webhook-patch": ("patch", _webhook_url("/", body={"description": "changed"}), WEBHOOKS),
    "webhook-delete": ("delete", _webhook_url("/"), {**WEBHOOKS, "owner": 204, "beta_eraser": 204}),
    "webhook-deliveries": ("get", _webhook_url("/deliveries"), WEBHOOKS),
    "webhook-test": ("post", _webhook_url("/test"), {**WEBHOOKS, "owner": 202, "beta_eraser": 202}),
}


def alpha_rows(organization) -> dict:
    """Every row of scope alpha (and the alpha clients and keys), all columns: what "unchanged" compares."""
    scoped = (
        Session,
        Message,
        MemoryTask,
        Skill,
        SkillExperience,
        SkillUse,
        SkillFeedback,
        SkillWithheld,
        EpisodicMemory,
        SemanticMemory,
        Entity,
        Profile,
    )
    rows = {model._meta.label: sorted(map(repr, model.objects.filter(scope="alpha").values())) for model in scoped}
    alpha_clients = Client.objects.filter(organization=organization, write_scope="alpha")
    rows["tenancy.Client"] = sorted(map(repr, alpha_clients.values()))
    rows["tenancy.ClientAPIKey"] = sorted(map(repr, ClientAPIKey.objects.filter(client__in=alpha_clients).values()))
    rows["privacy.ErasureRequest"] = sorted(
        map(repr, ErasureRequest.objects.filter(organization=organization).values())
    )
    rows["webhooks.WebhookEndpoint"] = sorted(
        map(repr, WebhookEndpoint.objects.filter(organization=organization).values())
    )
    rows["webhooks.WebhookDelivery"] = sorted(
        map(repr, WebhookDelivery.objects.filter(organization=organization).values())
    )
    rows["portability.ExportRequest"] = sorted(
        map(repr, ExportRequest.objects.filter(organization=organization).values())
    )
    return rows


def call(client, method, url, body=None):
    if body is None and method == "patch":
        body = {"outcome": "success"}
    return getattr(api_for(client), method)(url, body, format="json")


@pytest.mark.django_db
@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_each_neighbour_gets_only_what_the_rule_allows(endpoint, role, neighbours, add_messages):
    method, make, expected = ENDPOINTS[endpoint]
    owner, caller = neighbours["owner"], neighbours[role]
    url, missing_url, *bodies = make(owner, add_messages)
    body, missing_body = bodies or (None, None)
    before = alpha_rows(owner.organization)

    response = call(caller, method, url, body)

    assert response.status_code == expected[role], response.content
    if response.status_code >= 400:
        missing = call(caller, method, missing_url, missing_body)
        assert (missing.status_code, missing.content) == (response.status_code, response.content)
        assert alpha_rows(owner.organization) == before, "a refused request changes nothing"


@pytest.mark.django_db
def test_the_matrix_can_fail(neighbours, add_messages):
    """The alpha rows snapshot sees a change made by the owner, so "unchanged" above means something."""
    owner = neighbours["owner"]
    url, _ = _session_url(owner, add_messages)
    before = alpha_rows(owner.organization)
    assert call(owner, "patch", url).status_code == 200
    assert alpha_rows(owner.organization) != before


@pytest.mark.django_db
def test_malformed_ids_get_the_same_404(api):
    assert api.get("/api/v1/tasks/not-a-uuid/").content == api.get(f"/api/v1/tasks/{uuid.uuid4()}/").content


def _add(client, **body):
    payload = {"user_id": "p9", "messages": [{"role": "user", "content": f"turn from {client.write_scope}"}], **body}
    return api_for(client).post("/api/v1/memory/add", payload, format="json")


@pytest.mark.django_db
def test_another_scopes_session_id_answers_like_a_fresh_one(neighbours):
    """Session ids are unique per user and scope: beta reusing alpha's id (even of a sealed
    session) opens its own session, exactly as an unused id would."""
    owner, beta = neighbours["owner"], neighbours["beta_writer"]
    assert _add(owner, session_id="mark-alpha", seal=True).status_code == 202

    reused = _add(beta, session_id="mark-alpha")
    fresh = _add(beta, session_id="never-used")

    assert reused.status_code == fresh.status_code == 202
    shape = lambda body: {key: value for key, value in body.items() if key not in ("session_id", "task_ids")}  # noqa: E731
    assert shape(reused.json()) == shape(fresh.json())
    assert reused.json()["first_seq"] == 1 and reused.json()["status"] == "open"
    alpha = Session.objects.get(scope="alpha", session_id="mark-alpha")
    assert (alpha.status, alpha.message_count) == ("sealed", 1)


@pytest.mark.django_db
def test_a_write_by_one_scope_leaves_every_row_of_another_scope_unchanged(neighbours, settings):
    """Beta writes to the same user as alpha, opens newer sessions of both tags (which seal older
    ones of beta's own scope only), seals, sets outcomes, distils, and its background work runs:
    alpha's open sessions stay open and nothing of alpha changes."""
    settings.LLM_PROVIDER = "rules"
    settings.EXTRACTION_DEBOUNCE_SECONDS = 0
    owner, beta = neighbours["owner"], neighbours["beta_writer"]
    assert _add(owner, session_id="alpha-chat").status_code == 202
    assert _add(owner, session_id="alpha-job", session_tag="task").status_code == 202
    for task_id in MemoryTask.objects.filter(scope="alpha").values_list("pk", flat=True):
        task_execute(task_id=task_id, worker="test")
    before = alpha_rows(owner.organization)
    assert {session.status for session in Session.objects.filter(scope="alpha")} == {"open"}

    api = api_for(beta)
    assert _add(beta, session_id="beta-chat").status_code == 202
    assert _add(beta, session_id="beta-chat-2").status_code == 202  # seals beta-chat, not alpha-chat
    assert _add(beta, session_id="alpha-job", session_tag="task", outcome="success").status_code == 202
    assert _add(beta, session_id="beta-job", session_tag="task", seal=True, outcome="success").status_code == 202
    assert (
        api.patch("/api/v1/sessions/alpha-chat/?user_id=p9", {"outcome": "failure"}, format="json").status_code == 404
    )
    assert api.post("/api/v1/sessions/alpha-job/seal?user_id=p9").status_code == 200  # beta's own alpha-job
    for _ in range(3):  # distillation queues evolution: run until nothing of beta's is left queued
        for task_id in MemoryTask.objects.filter(scope="beta", status="queued").values_list("pk", flat=True):
            task_execute(task_id=task_id, worker="test")

    assert Session.objects.get(scope="beta", session_id="beta-chat").status == "sealed", "the test can fail"
    assert Session.objects.filter(scope="beta", distilled_at__isnull=False).exists()
    assert alpha_rows(owner.organization) == before
    assert _add(owner, session_id="alpha-chat").status_code == 202, "alpha's session still takes turns"

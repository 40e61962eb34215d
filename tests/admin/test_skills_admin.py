"""apps/skills/admin/: the changelist, the review queue and its actions, person edits, the
version page and the wall between organisations."""

import pytest
from django.contrib.admin.models import DELETION, LogEntry
from django.contrib.auth import get_user_model

from apps.skills.models import Skill, SkillUse, SkillVersion
from tests.admin.makers import pending_skill, skill_with_lineage
from tests.conftest import api_for
from tests.skills.factories import ExperienceFactory, SkillFactory, task_session

TURNS = [{"role": "user", "content": "Move my flight to Friday."}, {"role": "assistant", "content": "Moved."}]

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/skills/skill/"
REVIEW_QUEUE = "/admin/skills/skill/review/"


def act(client, url, action, skills, **extra):
    return client.post(url, {"action": action, "_selected_action": [str(s.pk) for s in skills], **extra})


def test_the_changelist_shows_the_curation_columns_and_searches_instructions(curator_client, organization):
    SkillFactory(organization=organization, name="rebook-flight", instructions="call rebook_flight(reservation)")
    SkillFactory(organization=organization, name="other", instructions="nothing relevant")
    page = curator_client.get(CHANGELIST)
    html = page.content.decode()
    for column in (
        "column-status",
        "column-entry_type",
        "column-scope",
        "column-version",
        "column-retrievals",
        "column-outcomes",
        "column-updated_at",
    ):
        assert column in html
    found = curator_client.get(CHANGELIST, {"q": "rebook_flight"}).content.decode()
    assert "rebook-flight" in found and ">other<" not in found


def test_the_changelist_sorts_by_success_rate_and_the_skill_page_charts_its_outcomes(
    curator_client, organization, client_a
):
    winner = SkillFactory(organization=organization, name="winner", description="Change a flight to another day.")
    loser = SkillFactory(organization=organization, name="loser", description="Change a flight to another day.")
    api = api_for(client_a)
    for number, (skill, outcome) in enumerate([(winner, "success"), (loser, "failure"), (winner, "success")]):
        user_id, session_id = f"traveller-{number}", f"trip-{number}"
        body = {"task": "change flight", "user_id": user_id, "session_id": session_id}
        assert api.post("/api/v1/skills/retrieve", body, format="json").status_code == 200
        SkillUse.objects.filter(session_id=session_id).exclude(skill=skill).delete()  # it used this one only
        task_session(client_a, messages=TURNS, session_id=session_id, user_id=user_id, outcome=outcome)

    rows = curator_client.get(CHANGELIST, {"o": "-9"}).context["cl"].result_list  # the success-rate column
    assert [(skill.name, skill.success_rate, skill.outcome_users) for skill in rows] == [
        ("winner", 1.0, 2),
        ("loser", 0.0, 1),
    ]
    assert "100% (2)" in curator_client.get(CHANGELIST).content.decode()
    page = curator_client.get(f"{CHANGELIST}{winner.pk}/change/").content.decode()
    assert "2 task sessions with an outcome count, of 2 users (each counted once): 2 succeeded, 0 failed" in page
    assert '<svg class="skill-outcomes"' in page and "2 succeeded, 0 failed</title>" in page
    assert "<script" not in page.split('<svg class="skill-outcomes"')[1].split("</svg>")[0]


def test_the_review_queue_lists_pending_skills_first(curator_client, organization):
    SkillFactory(organization=organization, name="aaa-active")
    pending_skill(organization, "zzz-pending")
    queue = curator_client.get(REVIEW_QUEUE)
    assert queue.status_code == 200
    names = [skill.name for skill in queue.context["cl"].result_list]
    assert names == ["zzz-pending", "aaa-active"]
    assert "Skill review queue" in queue.content.decode()
    assert [s.name for s in curator_client.get(CHANGELIST).context["cl"].result_list] == ["aaa-active", "zzz-pending"]


@pytest.mark.parametrize("url", [CHANGELIST, REVIEW_QUEUE])
def test_the_lists_take_a_bounded_number_of_queries(curator_client, organization, url, django_assert_max_num_queries):
    """The bound holds with 20 and with 200 rows: nothing is loaded per row."""
    for index in range(20):
        pending_skill(organization, f"pending-{index}")
    with django_assert_max_num_queries(9) as small:
        assert curator_client.get(url, {"all": ""}).status_code == 200
    Skill.objects.bulk_create(
        [
            Skill(
                organization=organization,
                scope=f"scope-{index % 3}",
                name=f"bulk-{index}",
                description="d",
                instructions="i" * 5000,
                status="active",
            )
            for index in range(180)
        ]
    )
    with django_assert_max_num_queries(len(small.captured_queries)):
        page = curator_client.get(url, {"all": ""})
    assert len(page.context["cl"].result_list) == 200
    rows_query = next(
        q["sql"]
        for q in small.captured_queries
        # The rows (their columns, the retrieval and outcome counts beside them), not a count of them.
        if q["sql"].startswith('SELECT "skills_skill"."id"') and "LIMIT" not in q["sql"]
    )
    assert '"skills_skill"."instructions"' not in rows_query and '"skills_skill"."embedding"' not in rows_query


def test_approve_reject_and_archive_are_versions_by_the_person(curator_client, organization):
    to_approve, to_reject, to_archive = (
        pending_skill(organization, name) for name in ("approve-me", "reject-me", "archive-me")
    )
    response = act(curator_client, REVIEW_QUEUE, "approve_selected", [to_approve])
    assert response.status_code == 302 and response["Location"] == REVIEW_QUEUE

    confirmation = act(curator_client, REVIEW_QUEUE, "reject_selected", [to_reject])
    assert confirmation.status_code == 200 and "reject-me" in confirmation.content.decode()
    to_reject.refresh_from_db()
    assert to_reject.status == "pending_review"
    without_reason = act(curator_client, REVIEW_QUEUE, "reject_selected", [to_reject], apply="1", reason="")
    assert without_reason.status_code == 200 and "This field is required" in without_reason.content.decode()
    act(curator_client, REVIEW_QUEUE, "reject_selected", [to_reject], apply="1", reason="Duplicates rebook-flight.")

    act(curator_client, CHANGELIST, "archive_selected", [to_archive])

    outcomes = {
        skill.name: (skill.status, skill.versions.order_by("-version").values_list("operation", "actor", "reason")[0])
        for skill in Skill.objects.all()
    }
    assert outcomes == {
        "approve-me": ("active", ("approve", "admin:curator", "Approved.")),
        "reject-me": ("archived", ("reject", "admin:curator", "Duplicates rebook-flight.")),
        "archive-me": ("archived", ("archive", "admin:curator", "Archived by a person.")),
    }


def test_an_action_that_does_not_apply_warns_and_changes_nothing(curator_client, organization):
    active = SkillFactory(organization=organization, name="already-live")
    response = act(curator_client, CHANGELIST, "approve_selected", [active])
    messages = [str(m) for m in response.wsgi_request._messages]
    assert messages == ["already-live is active; only skills pending review are approved."]
    assert SkillVersion.objects.filter(skill=active).count() == 0


def test_delete_goes_through_the_confirmation_and_the_service(curator_client, organization, curator):
    skill = pending_skill(organization, "delete-me")
    confirmation = act(curator_client, CHANGELIST, "delete_selected", [skill])
    assert confirmation.status_code == 200 and Skill.objects.filter(pk=skill.pk).exists()
    act(curator_client, CHANGELIST, "delete_selected", [skill], post="yes")
    assert not Skill.objects.filter(pk=skill.pk).exists()
    assert not SkillVersion.objects.filter(skill_id=skill.pk).exists()
    assert LogEntry.objects.filter(user=curator, action_flag=DELETION, object_id=str(skill.pk)).exists()


def test_saving_the_form_records_a_version_with_the_reason(curator_client, organization):
    skill = pending_skill(organization, "seat-change", triggers=["change my seat"])
    url = f"/admin/skills/skill/{skill.pk}/change/"
    form = {
        "name": "seat-change",
        "entry_type": "guide",
        "description": skill.description,
        "instructions": "1. get_reservation()\n2. update_seat()",
        "triggers": '["change my seat"]',
        "examples": "[]",
        "change_reason": "Use the seat tool",
        "versions-TOTAL_FORMS": "0",
        "versions-INITIAL_FORMS": "1",
        "versions-MIN_NUM_FORMS": "0",
        "versions-MAX_NUM_FORMS": "0",
    }
    response = curator_client.post(url, form)
    assert response.status_code == 302, response.context["adminform"].form.errors if response.context else response
    skill.refresh_from_db()
    version = skill.versions.get(version=2)
    assert (skill.entry_type, skill.status, skill.version) == ("guide", "pending_review", 2)
    assert (version.operation, version.actor, version.reason) == ("edit", "admin:curator", "Use the seat tool")
    assert version.snapshot["instructions"] == "1. get_reservation()\n2. update_seat()"

    curator_client.post(url, form)
    assert skill.versions.count() == 2


def test_the_versions_page_shows_the_diff_and_the_lineage(curator_client, client_a):
    skill, experience, error_turn = skill_with_lineage(client_a)
    html = curator_client.get(f"/admin/skills/skill/{skill.pk}/versions/").content.decode()
    assert 'data-field="instructions"' in html and "<ins> as YYYY-MM-DD</ins>" in html
    assert "tool_error" in html and "Error: date must be YYYY-MM-DD" in html
    assert f"/admin/conversations/session/{experience.session_id}/transcript/#turn-{error_turn.seq}" in html
    change = curator_client.get(f"/admin/skills/skill/{skill.pk}/change/").content.decode()
    assert f"/admin/skills/skill/{skill.pk}/versions/" in change


def test_staff_of_one_organisation_cannot_list_open_or_act_on_another_organisations_skills(
    curator_client,
    organization,
    client_b,
):
    mine = pending_skill(organization, "mine")
    theirs = pending_skill(client_b.organization, "theirs")
    their_lesson = ExperienceFactory(organization=client_b.organization, title="their lesson")
    versions_before = SkillVersion.objects.filter(skill=theirs).count()

    for url in (CHANGELIST, REVIEW_QUEUE, f"{CHANGELIST}?q=theirs"):
        listing = curator_client.get(url)
        assert [s.name for s in listing.context["cl"].result_list] == (["mine"] if "q=" not in url else [])
        assert str(theirs.pk) not in listing.content.decode()
    assert "their lesson" not in curator_client.get("/admin/skills/skillexperience/").content.decode()

    change = curator_client.get(f"/admin/skills/skill/{theirs.pk}/change/", follow=True)
    assert change.redirect_chain == [("/admin/", 302)]
    assert "doesn’t exist" in change.content.decode()
    assert curator_client.get(f"/admin/skills/skill/{theirs.pk}/versions/").status_code == 404
    assert curator_client.get(f"/admin/skills/skillexperience/{their_lesson.pk}/change/").status_code == 302
    assert curator_client.get(f"/admin/skills/skill/{theirs.pk}/delete/").status_code == 302
    assert curator_client.post(f"/admin/skills/skill/{theirs.pk}/delete/", {"post": "yes"}).status_code == 302

    act(curator_client, REVIEW_QUEUE, "approve_selected", [theirs, mine])
    act(curator_client, REVIEW_QUEUE, "reject_selected", [theirs], apply="1", reason="not mine")
    act(curator_client, REVIEW_QUEUE, "archive_selected", [theirs])
    act(curator_client, REVIEW_QUEUE, "delete_selected", [theirs], post="yes")
    theirs.refresh_from_db()
    assert (theirs.status, theirs.version) == ("pending_review", 1)
    assert SkillVersion.objects.filter(skill=theirs).count() == versions_before
    mine.refresh_from_db()
    assert mine.status == "active"  # the same request did act on the curator's own skill


def test_a_superuser_sees_every_organisation_and_can_filter_by_it(client, organization, client_b):
    pending_skill(organization, "mine")
    pending_skill(client_b.organization, "theirs")
    client.force_login(get_user_model().objects.create_superuser("root", password="x"))
    page = client.get(CHANGELIST)
    assert {s.name for s in page.context["cl"].result_list} == {"mine", "theirs"}
    html = page.content.decode()
    assert "organization__id__exact" in html and "column-organization" in html


def test_the_experience_list_and_page_show_signal_evidence_and_the_session(curator_client, client_a):
    skill, experience, error_turn = skill_with_lineage(client_a)
    listing = curator_client.get("/admin/skills/skillexperience/", {"signal": "tool_error"}).content.decode()
    assert experience.title in listing and "Error: date must be YYYY-MM-DD" in listing and "book-seattle" in listing
    assert (
        experience.title
        not in curator_client.get("/admin/skills/skillexperience/", {"signal": "inferred"}).content.decode()
    )
    page = curator_client.get(f"/admin/skills/skillexperience/{experience.pk}/change/").content.decode()
    transcript = f"/admin/conversations/session/{experience.session_id}/transcript/"
    assert f"{transcript}#turn-{error_turn.seq}" in page
    assert f"/admin/skills/skill/{skill.pk}/versions/#v2" in page

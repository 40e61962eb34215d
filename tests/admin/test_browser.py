"""The curation admin in a real browser: Playwright driving Debian's Chromium against a live server
on the embedded database. Screenshots land in tests/artifacts/ on every run."""

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from apps.skills.models import Skill
from tests.admin.makers import PASSWORD, pending_skill, skill_with_lineage, staff_user

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
pytestmark = pytest.mark.browser


@pytest.fixture
def page(chromium, live_server):
    context = chromium.new_context(base_url=live_server.url, viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(15_000)
    page = context.new_page()
    failed = []
    page.on(
        "response",
        lambda response: failed.append(response.url) if response.status >= 400 and "/static/" in response.url else None,
    )
    yield page
    context.close()
    assert failed == [], f"static files failed to load: {failed}"


def shot(page, name: str, locator=None) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    (locator or page).screenshot(path=str(ARTIFACTS / name), **({} if locator else {"full_page": True}))


def run_action(page, action: str, skill: Skill) -> None:
    page.check(f'input[name="_selected_action"][value="{skill.pk}"]')
    page.select_option('select[name="action"]', action)
    page.click('button[name="index"]')


def test_a_curator_reviews_approves_diffs_traces_and_deletes_in_a_browser(page, transactional_db, client_a, client_b):
    skill, experience, error_turn = skill_with_lineage(client_a)
    doomed = pending_skill(client_a.organization, "cancel-a-trip")
    rejected = pending_skill(client_a.organization, "refund-everything")
    theirs = pending_skill(client_b.organization, "their-secret-skill")
    staff_user(client_a.organization)

    page.goto("/admin/login/?next=/admin/")
    page.fill("#id_username", "curator")
    page.fill("#id_password", PASSWORD)
    page.click('input[type="submit"]')
    expect(page.locator("#dashboard")).to_contain_text("Pending review")
    # The admin's own stylesheet is served under the live server (WhiteNoise or the static handler).
    assert page.evaluate("getComputedStyle(document.querySelector('#header')).display") == "flex"

    page.click('a[data-tile="skills-pending-review"]')
    expect(page).to_have_url(re.compile(r"/admin/skills/skill/review/$"))
    expect(page.locator("#result_list")).to_contain_text("book-a-flight")
    expect(page.locator("#result_list")).not_to_contain_text("their-secret-skill")
    shot(page, "review-queue.png")

    run_action(page, "approve_selected", skill)
    expect(page.locator(".messagelist .success")).to_have_text("Approved 1 skill(s).")
    skill.refresh_from_db()
    assert (skill.status, skill.versions.order_by("-version").first().actor) == ("active", "admin:curator")

    run_action(page, "reject_selected", rejected)
    page.fill("#id_reason", "Refunds need a supervisor.")
    page.click('input[type="submit"][value="Reject 1 skill(s)"]')
    expect(page.locator(".messagelist .success")).to_have_text("Rejected 1 skill(s).")

    page.click(f'#result_list a[href="/admin/skills/skill/{skill.pk}/change/"]')
    page.click("text=Versions & lineage")
    status_diff = page.locator('#v3 table.diff[data-field="status"]')
    expect(status_diff.locator("td.left")).to_have_text("pending_review")
    expect(status_diff.locator("td.right")).to_have_text("active")
    expect(page.locator('#v2 table.diff[data-field="instructions"] ins')).to_have_text(" as YYYY-MM-DD")
    shot(page, "skill-diff.png")

    lineage = page.locator("#v2 .lineage")
    expect(lineage).to_contain_text("tool_error")
    expect(lineage).to_contain_text("Error: date must be YYYY-MM-DD")
    shot(page, "skill-lineage.png", lineage)
    lineage.locator("a.turn-link").click()
    expect(page).to_have_url(re.compile(rf"/transcript/#turn-{error_turn.seq}$"))
    expect(page.locator(f"#turn-{error_turn.seq}")).to_contain_text("Error: date must be YYYY-MM-DD")
    shot(page, "lineage-transcript-turn.png")

    page.goto("/admin/skills/skill/review/")
    run_action(page, "delete_selected", doomed)
    page.click('input[type="submit"][value="Yes, I’m sure"]')
    expect(page.locator(".messagelist .success")).to_contain_text("Successfully deleted 1 skill")
    assert not Skill.objects.filter(pk=doomed.pk).exists()

    page.goto(f"/admin/skills/skill/{theirs.pk}/change/")
    expect(page).to_have_url(re.compile(r"/admin/$"))
    expect(page.locator(".messagelist")).to_contain_text("doesn’t exist")
    assert page.goto(f"/admin/skills/skill/{theirs.pk}/versions/").status == 404
    theirs.refresh_from_db()
    assert (theirs.status, theirs.version) == ("pending_review", 1)

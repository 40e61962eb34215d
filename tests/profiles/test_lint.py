"""apps/profiles/services/lint.py: stale pages are recompiled, orphans archived, contradictions only with an LLM."""

import pytest

from apps.pipeline.models import MemoryTask
from apps.profiles.models import Edge, Entity, LintFinding, Mention, Profile, ProfileSource
from apps.profiles.services.compile import profile_compile
from apps.profiles.services.entities import session_project
from apps.profiles.services.lint import finding_resolve, profiles_lint
from apps.search.engine import search

pytestmark = pytest.mark.django_db


@pytest.fixture
def pages(conversation, rules):
    session_project(session=conversation)
    for entity in Entity.objects.all():
        profile_compile(entity=entity)
    MemoryTask.objects.filter(task_type="compile_profile").delete()
    return {profile.name: profile for profile in Profile.objects.all()}


def test_a_page_that_lost_some_sources_is_stale_and_queued_for_recompile(pages, run_tasks):
    melanie = pages["Melanie"]
    cited = sorted(melanie.sources.all(), key=lambda source: source.quote)
    from apps.conversations.models import Message

    citing = set(ProfileSource.objects.filter(item_id=cited[0].item_id).values_list("profile_id", flat=True))
    Message.objects.filter(pk=cited[0].item_id).delete()

    counts = profiles_lint()

    # Every page that quoted the turn (and still has other sources) is stale, and only those.
    assert counts["stale"] == counts["recompiles"] == len(citing) >= 1 and counts["orphan"] == 0
    assert set(LintFinding.objects.values_list("profile_id", flat=True)) == citing
    finding = LintFinding.objects.get(profile=melanie)
    assert (finding.kind, finding.status) == ("stale", "open")
    assert f"1 of the {len(cited)} items" in finding.detail
    assert profiles_lint()["stale"] == 0  # one open finding per page and kind

    run_tasks("compile_profile")

    melanie.refresh_from_db()
    assert melanie.revision == 2 and cited[0].quote.split(" … ")[0] not in melanie.markdown
    finding.refresh_from_db()
    assert (finding.status, finding.resolved_by) == ("resolved", "recompile") and finding.resolved_at
    assert profiles_lint()["stale"] == 0


def test_a_page_whose_sources_are_all_gone_is_an_archived_orphan_and_leaves_search(pages, client_a):
    jon = pages["Jon"]
    hits = search(
        reader=client_a.reader,
        query="Jon",
        memory_types=["profile"],
        method="bm25",
        limit=5,
        filters={"user_id": "caroline"},
    )
    assert jon.pk in {hit.instance.pk for hit in hits}
    from apps.conversations.models import Message

    gone = {source.item_id for source in jon.sources.all()}
    orphans = {
        profile.pk for profile in Profile.objects.all() if {source.item_id for source in profile.sources.all()} <= gone
    }
    Message.objects.filter(pk__in=gone).delete()

    assert profiles_lint()["orphan"] == len(orphans) and jon.pk in orphans

    jon.refresh_from_db()
    assert jon.status == "archived" and jon.markdown == ""
    assert LintFinding.objects.get(profile=jon).kind == "orphan"
    hits = search(
        reader=client_a.reader,
        query="Jon",
        memory_types=["profile"],
        method="bm25",
        limit=5,
        filters={"user_id": "caroline"},
    )
    assert jon.pk not in {hit.instance.pk for hit in hits}


def test_mentions_of_deleted_items_are_pruned_and_edges_rebuilt(pages, conversation):
    turn = conversation.messages.get(seq=3)  # Caroline names Jon
    assert Mention.objects.filter(item_id=turn.pk).exists()
    turn.delete()

    profiles_lint()

    assert not Mention.objects.filter(item_id=turn.pk).exists()
    caroline_jon = Edge.objects.get(source__name__in=["Caroline", "Jon"], target__name__in=["Caroline", "Jon"])
    assert caroline_jon.weight == 1 and [item["seq"] for item in caroline_jon.evidence] == [5]


def test_contradictions_are_checked_only_with_an_llm_and_when_enabled(pages, fake_openai, settings):
    settings.PROFILE_LINT_CONTRADICTIONS = False
    profiles_lint()
    assert fake_openai.chat_requests() == []

    settings.PROFILE_LINT_CONTRADICTIONS = True
    names = [profile.name for profile in Profile.objects.filter(status="active").order_by("name")]
    first, second = names.index("Caroline") + 1, names.index("Melanie") + 1
    fake_openai.add_json(
        {
            "contradictions": [
                {"page": first, "peer": second, "detail": "Caroline says she hikes; Melanie says Caroline never does."},
                {"page": first, "peer": first, "detail": "a page against itself is ignored"},
                {"page": 99, "peer": 1, "detail": "a page it was not shown is ignored"},
            ]
        }
    )

    assert profiles_lint()["contradiction"] == 1

    (finding,) = LintFinding.objects.filter(kind="contradiction")
    assert (finding.profile.name, finding.peer.name, finding.status) == ("Caroline", "Melanie", "open")
    finding_resolve(finding=finding, actor="admin:ann")
    assert (finding.status, finding.resolved_by) == ("resolved", "admin:ann")


def test_offline_no_contradiction_is_ever_invented(pages, settings):
    settings.PROFILE_LINT_CONTRADICTIONS = True
    assert profiles_lint()["contradiction"] == 0
    assert not LintFinding.objects.exists()


def test_a_cleared_page_with_nothing_left_is_archived_as_an_orphan_and_its_stale_finding_resolved(pages, run_tasks):
    """Erasure clears a page with a `stale` finding and recompiles it; when the recompile finds
    nothing left to quote, the page is archived, recorded as an orphan, and the stale finding closed."""
    from apps.conversations.models import Message
    from apps.profiles.services.compile import profiles_clear_for_recompile

    jon = pages["Jon"]
    Mention.objects.filter(entity=jon.entity).delete()  # what the erasure's purge does first
    Message.objects.filter(pk__in=[source.item_id for source in jon.sources.all()]).delete()
    assert profiles_clear_for_recompile(profile_ids=[jon.pk], reason="erased") == 1
    assert LintFinding.objects.get(profile=jon).kind == "stale"

    run_tasks("compile_profile")

    jon.refresh_from_db()
    assert jon.status == "archived" and jon.markdown == ""
    findings = {finding.kind: finding for finding in LintFinding.objects.filter(profile=jon)}
    assert set(findings) == {"stale", "orphan"}
    assert (findings["stale"].status, findings["stale"].resolved_by) == ("resolved", "archive")
    assert findings["orphan"].status == "open"
    profiles_lint()
    assert LintFinding.objects.filter(profile=jon).count() == 2  # archived already: lint finds nothing more


def test_pages_too_long_for_one_prompt_are_checked_in_pairs_of_groups_within_the_budget(pages, fake_openai, settings):
    from itertools import combinations

    from apps.providers.tokens import prompt_tokens

    settings.PROFILE_LINT_CONTRADICTIONS = True
    settings.LLM_MAX_PROMPT_TOKENS = 2000
    active = list(Profile.objects.filter(status="active").order_by("name"))
    assert len(active) >= 3
    for profile in active:  # each page over half a prompt: cut to half, two meet per call
        Profile.objects.filter(pk=profile.pk).update(markdown=f"# {profile.name}\n" + "- Likes long walks.\n" * 140)
    fake_openai.default_answer = {"contradictions": []}

    profiles_lint()

    prompts = [request["messages"] for request in fake_openai.chat_requests()]
    assert max(prompt_tokens(prompt) for prompt in prompts) <= 2000
    met = [{profile.name for profile in active if f"# {profile.name}\n" in prompt[1]["content"]} for prompt in prompts]
    # Every two pages met in some call, and no call held more than fits.
    pairs_met = {frozenset(pair) for names in met for pair in combinations(names, 2)}
    assert pairs_met == {frozenset((a.name, b.name)) for a, b in combinations(active, 2)}
    assert all(len(names) == 2 for names in met) and len(prompts) == len(active) * (len(active) - 1) // 2

"""The re-runnable date pass (apps.memories.services.dates, `manage.py normalize_dates`, its task)
over stored turns of both session tags and memories, and the dates new writes get themselves."""

import json
from datetime import date, datetime, timezone

import pytest
from django.core.management import CommandError, call_command

from apps.conversations.models import Message
from apps.memories.models import EpisodicMemory, SemanticMemory
from apps.memories.services.dates import dates_normalize
from apps.memories.services.memories import SEMANTIC, memory_store
from apps.pipeline.models import MemoryTask
from apps.pipeline.services import task_execute
from apps.tenancy.services import end_user_get_or_create
from tests.memories.makers import episodic, semantic

pytestmark = pytest.mark.django_db

MAY_8 = "2023-05-08T13:56:00+00:00"


def span(row):
    row.refresh_from_db()
    return None if row.date_span is None else (row.date_span.lower.isoformat(), row.date_span.upper.isoformat())


@pytest.fixture
def stored(client_a, add_messages):
    """Turns of a conversation and of a task session, and memories, as an older version left them:
    nothing dated (no indexing has run)."""
    add_messages(
        client_a,
        user_id="caroline",
        session_id="talk",
        session_tag="conversation",
        messages=[
            {"role": "user", "content": "I went to a support group yesterday.", "occurred_at": MAY_8},
            {"role": "assistant", "content": "I painted a lake sunrise in 2022.", "occurred_at": MAY_8},
            {"role": "user", "content": "Nothing dated here.", "occurred_at": MAY_8},
        ],
    )
    add_messages(
        client_a,
        user_id="caroline",
        session_id="job",
        session_tag="task",
        messages=[
            {"role": "user", "content": "The deploy broke two days ago; fix it.", "occurred_at": MAY_8},
            {"role": "tool", "name": "logs", "content": "error since yesterday", "occurred_at": MAY_8},
        ],
    )
    add_messages(
        client_a,
        user_id="melanie",
        session_id="other",
        messages=[{"role": "user", "content": "See you next month.", "occurred_at": MAY_8}],
    )
    fact = semantic(client_a.organization, "default", "caroline", "Caroline", "She moved to Sweden in June 2023.")
    gone = episodic(
        client_a.organization, "default", "caroline", "Went hiking last week", deleted_at=datetime.now(timezone.utc)
    )
    return {"fact": fact, "gone": gone, "turn": Message.objects.get(content__startswith="I went to a support")}


def test_the_pass_dates_turns_of_both_tags_and_memories_and_a_second_run_changes_nothing(client_a, stored):
    result = dates_normalize(organization=client_a.organization)
    # Four spoken turns name a date (the tool output and the undated turn do not), one live memory.
    assert {name: result[name]["changed"] for name in ("message", "episodic", "semantic")} == {
        "message": 4,
        "episodic": 0,
        "semantic": 1,
    }
    assert result["message"]["read"] == 6 and result["episodic"]["read"] == 0  # a deleted memory is left alone
    assert result["changed"] == 5 and len(result["message"]["changed_ids"]) == 4

    turn = stored["turn"]
    assert span(turn) == ("2023-05-07", "2023-05-08")
    assert turn.metadata["resolved_date"] == "2023-05-07" and turn.context.endswith("\u23f1 7 May 2023")
    painted = Message.objects.get(content__contains="sunrise")
    assert span(painted) == ("2022-01-01", "2023-01-01") and "resolved_date" not in painted.metadata  # absolute
    task_turn = Message.objects.get(content__startswith="The deploy")
    assert span(task_turn) == ("2023-05-06", "2023-05-07")
    assert span(Message.objects.get(role="tool")) is None
    assert span(stored["fact"]) == ("2023-06-01", "2023-07-01")
    assert span(stored["gone"]) is None

    again = dates_normalize(organization=client_a.organization)
    assert again["changed"] == 0 and again["message"]["read"] == 6


def test_a_rerun_rewrites_only_what_the_resolver_now_dates_differently(client_a, stored):
    dates_normalize(organization=client_a.organization)
    turn = stored["turn"]
    # As a resolver that did not know "yesterday" would have left it.
    Message.objects.filter(pk=turn.pk).update(date_span=None, metadata={})
    result = dates_normalize(organization=client_a.organization, batch_size=1)
    assert result["changed"] == 1 and result["message"]["changed_ids"] == [str(turn.pk)]
    assert span(turn) == ("2023-05-07", "2023-05-08") and turn.metadata["date_expression"] == "yesterday"


def test_the_pass_keeps_to_the_user_or_scope_asked_for(client_a, stored):
    result = dates_normalize(organization=client_a.organization, user_id="melanie")
    assert (result["message"]["read"], result["message"]["changed"], result["semantic"]["read"]) == (1, 1, 0)
    assert span(stored["turn"]) is None
    assert dates_normalize(organization=client_a.organization, scope="elsewhere")["message"]["read"] == 0


def test_progress_is_reported_batch_by_batch(client_a, stored):
    seen = []
    dates_normalize(organization=client_a.organization, batch_size=4, on_progress=lambda *step: seen.append(step))
    assert [step for step in seen if step[0] == "message"] == [("message", 4, 6), ("message", 6, 6)]


def test_the_command_reports_changes_then_nothing_to_change(client_a, stored, capsys):
    name = client_a.organization.name
    call_command("normalize_dates", "--org", name, "--user", "caroline", "--json")
    first = json.loads(capsys.readouterr().out)
    assert first["message"]["changed"] == 3 and first["semantic"]["changed"] == 1
    call_command("normalize_dates", "--org", name)  # the rest of the organisation: Melanie's turn
    assert "Re-dated 1 rows (message 1 of 6" in capsys.readouterr().out
    call_command("normalize_dates", "--org", name)
    captured = capsys.readouterr()
    assert "Nothing to change" in captured.out and "message" in captured.err  # the progress bar
    for arguments, message in (
        (("--org", "nobody"), "No organisation"),
        (("--org", name, "--user", "ghost"), "No end user"),
        (("--org", name, "--scope", "bad scope"), "Invalid scope"),
        (("--org", name, "--batch-size", "0"), "--batch-size"),
    ):
        with pytest.raises(CommandError, match=message):
            call_command("normalize_dates", *arguments)


def test_the_task_runs_the_same_pass(client_a, stored, capsys):
    call_command("normalize_dates", "--org", client_a.organization.name, "--background", "--json")
    task = MemoryTask.objects.get(pk=json.loads(capsys.readouterr().out)["task_id"])
    assert task.task_type == "normalize_dates" and task.organization == client_a.organization
    assert task_execute(task_id=task.pk, worker="test") == "succeeded"
    task.refresh_from_db()
    assert task.result["changed"] == 5 and task.result["message"]["changed"] == 5 - 1


def test_new_turns_are_dated_when_indexed_and_new_memories_when_written(client_a, add_messages, stored):
    body = add_messages(
        client_a,
        user_id="caroline",
        session_id="job2",
        session_tag="task",
        messages=[{"role": "user", "content": "Last May the build was green.", "occurred_at": MAY_8}],
    )
    for task in MemoryTask.objects.filter(pk__in=body["task_ids"], task_type="embed_messages"):
        task_execute(task_id=task.pk, worker="test")
    assert span(Message.objects.get(content__startswith="Last May")) == ("2022-05-01", "2022-06-01")
    end_user = end_user_get_or_create(organization=client_a.organization, user_id="caroline")
    memory = memory_store(
        memory_type=SEMANTIC,
        client=client_a,
        end_user=end_user,
        fields={"name": "Caroline", "summary": "Adopted a dog on 3 March 2021."},
        actor="test",
    )
    assert span(memory) == ("2021-03-03", "2021-03-04")
    assert SemanticMemory.objects.filter(date_span__isnull=False).count() == 1  # the stored fact is not yet dated
    assert EpisodicMemory.objects.count() == 1


def test_dates_a_stored_memory_reads_as_of_its_source_turns(client_a, stored):
    turn = stored["turn"]
    fact = stored["fact"]
    SemanticMemory.objects.filter(pk=fact.pk).update(
        summary="She went to a support group yesterday.", source_message_ids=[turn.pk]
    )
    dates_normalize(organization=client_a.organization)
    assert span(fact) == ("2023-05-07", "2023-05-08")  # yesterday of the turn that taught it, not of today
    assert date.today().isoformat() != "2023-05-07"

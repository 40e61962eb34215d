"""Erasure against the compiled-memory work it races with (apps.pipeline.locks' registry): a profile
compile that has read the user's turns and waits for the model when the erasure starts. The erasure
must wait for it and then purge what it wrote, never purge first and let the compile commit quotes
of erased turns afterwards."""

import threading
import time

import pytest
from django.db import connection

from apps.conversations.models import Message
from apps.pipeline.models import MemoryTask
from apps.pipeline.services import task_execute
from apps.privacy.models import ErasureRequest
from apps.privacy.services.erasure import ErasureIncomplete, erasure_request, erasure_run
from apps.privacy.services.purge import subject_locks
from apps.privacy.services.subjects import subject_resolve
from apps.privacy.services.verify import subject_verify
from apps.profiles.handlers import OWNER_LOCKS
from apps.profiles.models import Entity, ProfileSource
from apps.profiles.services.entities import COMPILE_PROFILE, session_project

pytestmark = pytest.mark.django_db(transaction=True)


def in_thread(function, outcome: dict, name: str) -> threading.Thread:
    def run():
        try:
            outcome[name] = function()
        except BaseException as exc:  # reported by the test
            outcome[name] = exc
        finally:
            connection.close()  # each thread has its own connection

    thread = threading.Thread(target=run, name=name)
    thread.start()
    return thread


def test_an_erasure_waits_for_a_compile_in_flight_and_purges_what_it_wrote(conversation, fake_openai, settings):
    settings.LLM_PROVIDER = "rules"
    session_project(session=conversation)  # Caroline's entities and mentions, offline
    # Projected by hand: the add's own projection task is done (a compile gives way to a pending one).
    MemoryTask.objects.filter(task_type="project_entities").update(status=MemoryTask.Status.SUCCEEDED)
    settings.LLM_PROVIDER = "openai"
    entity = Entity.objects.get(name="Caroline", end_user=conversation.end_user)
    subject = subject_resolve(organization=conversation.organization, kind="user", subject_id="caroline")
    assert OWNER_LOCKS.key_of(entity) in subject_locks(subject)

    fake_openai.add_json({"markdown": "# Caroline\n- plans to adopt a child next year [1]", "used": [1]})
    compile_waits_for_model, model_answers = threading.Event(), threading.Event()
    fake_openai.on_request = lambda path: (compile_waits_for_model.set(), model_answers.wait(4))
    task = MemoryTask.objects.create(
        task_type=COMPILE_PROFILE,
        organization=entity.organization,
        payload={"entity": str(entity.pk)},
    )
    erasure = erasure_request(subject=subject, requested_by=None, requested_by_staff="admin:test")
    outcome: dict = {}

    compiling = in_thread(lambda: task_execute(task_id=task.pk, worker="test"), outcome, "compile")
    assert compile_waits_for_model.wait(10), "the compile reached the model, holding the owner lock"
    erasing = in_thread(lambda: erasure_run(erasure=ErasureRequest.objects.get(pk=erasure.pk)), outcome, "erasure")
    time.sleep(1.0)
    # The erasure waits for the compile's lock: nothing is purged yet.
    assert erasing.is_alive()
    assert Message.objects.filter(end_user=conversation.end_user).exists()

    model_answers.set()
    compiling.join(30)
    erasing.join(60)

    assert outcome["compile"] == "succeeded", "the compile committed its page, quoting Caroline's turns"
    if isinstance(outcome["erasure"], ErasureIncomplete):
        # The compile's task row was still finishing when the purge reached the tasks: the pipeline
        # runs the erasure again (its task fails and is retried), as here.
        erasure_run(erasure=ErasureRequest.objects.get(pk=erasure.pk))
    else:
        assert not isinstance(outcome["erasure"], BaseException), outcome["erasure"]
    # The page the compile committed quoted Caroline's turns; the erasure that ran after it purged them.
    assert not ProfileSource.objects.filter(profile__entity__end_user_id=entity.end_user_id).exists()
    assert subject_verify(subject=subject, include_redis=False)["total"] == 0
    assert ErasureRequest.objects.get(pk=erasure.pk).status == ErasureRequest.Status.SUCCEEDED

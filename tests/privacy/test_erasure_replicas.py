"""An erasure with a read replica (a real streaming one, harness/replica.py): `succeeded` only once the
replica reads are served from has replayed it; one that stays behind fails the erasure, which runs again."""

import threading

import pytest
from django.db import DEFAULT_DB_ALIAS

from apps.core import replicas
from apps.privacy.models import ErasureRequest
from apps.privacy.services.erasure import ErasureIncomplete, erasure_request, erasure_run
from apps.privacy.services.subjects import subject_resolve
from harness.processes import wait_for
from tests.core.test_replicas import ALIAS, add, replayed, replica, streaming_replica  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.django_db(transaction=True, databases=[DEFAULT_DB_ALIAS, ALIAS]), pytest.mark.worker]

WORDS = "my passport number is kept in the blue drawer"


@pytest.fixture
def paused_with_the_words(replica, client_a, settings):  # noqa: F811
    """The replica holds alice's turn, then stops replaying while staying one reads are served from."""
    settings.REPLICA_MAX_LAG_SECONDS = 120.0  # however slow this machine: the paused replica is still served
    client_a.can_erase = True
    client_a.save(update_fields=["can_erase"])
    add(client_a, WORDS)
    wait_for(lambda: replayed(replica, WORDS), timeout=10, message="replay")
    wait_for(lambda: replicas.read_alias() == ALIAS, timeout=10, message="the replica in use")
    replica.pause_replay()
    return subject_resolve(organization=client_a.organization, kind="user", subject_id="alice")


def test_an_erasure_waits_for_the_replica_to_replay_it_before_it_succeeds(
    replica,
    paused_with_the_words,
    settings,  # noqa: F811
):
    settings.ERASURE_REPLICA_WAIT_SECONDS = 60
    erasure = erasure_request(subject=paused_with_the_words)
    resume = threading.Timer(2.0, replica.resume_replay)
    resume.start()
    try:
        erasure_run(erasure=ErasureRequest.objects.get(pk=erasure.pk))
    finally:
        resume.join()

    # At the moment it reports success, the replica no longer serves the words.
    assert not replayed(replica, WORDS)
    assert ErasureRequest.objects.get(pk=erasure.pk).status == "succeeded"


def test_a_replica_that_stays_behind_fails_the_erasure_naming_it(replica, paused_with_the_words, settings):  # noqa: F811
    settings.ERASURE_REPLICA_WAIT_SECONDS = 1
    erasure = erasure_request(subject=paused_with_the_words)

    with pytest.raises(ErasureIncomplete, match=ALIAS):
        erasure_run(erasure=ErasureRequest.objects.get(pk=erasure.pk))

    erasure.refresh_from_db()
    assert erasure.status == "failed" and erasure.residual["replicas_behind"] == [ALIAS]
    assert replayed(replica, WORDS)  # what the erasure refused to call done

    replica.resume_replay()
    erasure_run(erasure=erasure)  # the pipeline's next attempt
    erasure.refresh_from_db()
    assert erasure.status == "succeeded" and not replayed(replica, WORDS)

"""StandingLock (apps.pipeline.locks): an advisory lock held on a connection of its own, for as long
as that session lives, against the real database."""

import pytest
from django.db import connection

from apps.pipeline.locks import StandingLock

pytestmark = pytest.mark.django_db(transaction=True)


def _holder_pid(key_lock: StandingLock) -> int:
    with key_lock._connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def test_one_holder_at_a_time_and_the_lock_ends_with_its_session():
    first, second = StandingLock("test:standing"), StandingLock("test:standing")
    try:
        assert first.acquire() and first.held()
        assert not second.acquire() and not second.held()
        # Django's own connection of this thread is not the lock's: closing it keeps the lock.
        connection.close()
        assert first.held() and not second.acquire()

        # The holder's session ends (a vanished machine, a database restart): the lock is free at once.
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [_holder_pid(first)])
        assert not first.held()
        assert second.acquire()
        assert not first.acquire()

        second.release()
        assert first.acquire()
    finally:
        first.release()
        second.release()

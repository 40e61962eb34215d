"""Beat is a singleton (apps.pipeline.beat): two real beat processes on one database, one sends the
periodic tasks and the other stands by, then takes over when the first is SIGKILLed."""

import re
import time

import pytest
from django.db import connection
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from apps.pipeline.beat import STANDBY_RETRY_SECONDS
from harness.processes import CeleryBeat

pytestmark = pytest.mark.django_db(transaction=True)

REPUBLISH = "pipeline: re-publish due tasks"
ACTIVE = "holds the beat lock: this beat sends the periodic tasks"
STANDING_BY = "another beat holds the beat lock"


def sent(beat: CeleryBeat) -> int:
    """How many times this beat sent the re-publish job, by its own log."""
    return len(re.findall(rf"Sending due task {re.escape(REPUBLISH)} ", beat.log()))


def republish_messages(redis) -> int:
    return sum(message["task"] == "pipeline.republish_due_tasks" for message in redis.published())


@pytest.fixture
def beats(private_redis, tmp_path):
    """`beats("name")` makes a beat process on the test database and the private Redis; all are
    SIGKILLed at teardown (before the test database is flushed)."""
    made: list[CeleryBeat] = []

    def make(name: str) -> CeleryBeat:
        beat = CeleryBeat(
            broker_url=private_redis.url, settings_dict=connection.settings_dict, log_path=tmp_path / f"{name}.log"
        )
        made.append(beat)
        return beat

    yield make
    for beat in made:
        beat.kill()
    for beat in made:  # shown by pytest when the test failed
        print(f"----- {beat.log_path.name} -----\n{beat.log()}")


def test_a_second_beat_sends_nothing_and_takes_over_when_the_first_dies(beats, private_redis):
    every_second, _ = IntervalSchedule.objects.get_or_create(every=1, period=IntervalSchedule.SECONDS)
    assert PeriodicTask.objects.filter(name=REPUBLISH).update(interval=every_second) == 1

    first = beats("first").start(ready=ACTIVE)
    second = beats("second").start(ready=STANDING_BY)

    # Both run side by side: only the first sends, once a second, as a lone beat does.
    window_start, messages_before = time.monotonic(), republish_messages(private_redis)
    time.sleep(6)
    window = time.monotonic() - window_start
    assert sent(first) >= 4
    assert sent(second) == 0, "the standing-by beat sent a periodic task"
    assert republish_messages(private_redis) - messages_before <= window + 2, "the job was sent more than once a second"
    assert STANDING_BY in second.log() and ACTIVE not in second.log()

    first.kill()  # its database session ends with it, and so does its lock
    killed_at = time.monotonic()
    second.wait_for_log(ACTIVE, timeout=STANDBY_RETRY_SECONDS + 10)
    takeover = time.monotonic() - killed_at
    print(f"the standing-by beat took over {takeover:.1f} s after the first was killed")
    assert takeover < STANDBY_RETRY_SECONDS + 5
    wait_deadline = time.monotonic() + 10
    while sent(second) < 2 and time.monotonic() < wait_deadline:
        time.sleep(0.2)
    assert sent(second) >= 2, "the beat that took over sends the schedule"

    # A beat started again after the fault stands by in its turn.
    third = beats("third").start(ready=STANDING_BY)
    time.sleep(3)
    assert sent(third) == 0

"""apps/core/schedules.py: `migrate` alone leaves every beat job in place, keeping an operator's edits."""

import pytest
from django.core.management import call_command
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from apps.core.schedules import SCHEDULES

pytestmark = pytest.mark.django_db(transaction=True)

EXPECTED = {
    "pipeline.republish_due_tasks",
    "pipeline.recover_stale_tasks",
    "pipeline.prune_finished_tasks",
    "privacy.enqueue_retention",
}


def test_the_migrated_database_has_every_registered_schedule():
    rows = {
        task.name: (task.task, task.interval.every, task.enabled)
        for task in PeriodicTask.objects.select_related("interval")
    }
    assert rows == {name: (task, every, True) for name, (task, every) in SCHEDULES.items()}
    # Republishing, stale recovery, sealing, retention and pruning are all among them.
    assert EXPECTED <= {task for task, _ in SCHEDULES.values()}
    assert any("seal" in task for task, _ in SCHEDULES.values())


def test_migrate_restores_a_deleted_schedule_and_keeps_an_operators_interval():
    name = next(name for name, (task, _) in SCHEDULES.items() if task == "pipeline.recover_stale_tasks")
    edited = PeriodicTask.objects.get(name=name)
    edited.interval = IntervalSchedule.objects.create(every=7, period=IntervalSchedule.SECONDS)
    edited.enabled = False
    edited.save()
    deleted = next(name for name, (task, _) in SCHEDULES.items() if task == "pipeline.republish_due_tasks")
    PeriodicTask.objects.filter(name=deleted).delete()

    call_command("migrate", verbosity=0)

    edited.refresh_from_db()
    assert (edited.interval.every, edited.enabled) == (7, False)
    assert PeriodicTask.objects.get(name=deleted).interval.every == SCHEDULES[deleted][1]


def test_setup_schedules_remains_an_idempotent_repair_command():
    PeriodicTask.objects.all().delete()
    call_command("setup_schedules", verbosity=0)
    call_command("setup_schedules", verbosity=0)
    assert sorted(PeriodicTask.objects.values_list("name", flat=True)) == sorted(SCHEDULES)

"""The beat schedules of every app, upserted by name into django-celery-beat."""

from django.db import transaction
from django_celery_beat.models import IntervalSchedule, PeriodicTask

# name -> (celery task name, every N seconds). Apps add their periodic jobs here.
SCHEDULES: dict[str, tuple[str, int]] = {}


def register_schedule(*, name: str, task: str, every_seconds: int) -> None:
    SCHEDULES[name] = (task, every_seconds)


@transaction.atomic
def schedules_upsert() -> list[str]:
    """Creates missing schedules; an existing one keeps the interval an operator set in the admin."""
    for name, (task, every_seconds) in SCHEDULES.items():
        interval, _ = IntervalSchedule.objects.get_or_create(every=every_seconds, period=IntervalSchedule.SECONDS)
        PeriodicTask.objects.get_or_create(name=name, defaults={"task": task, "interval": interval})
        PeriodicTask.objects.filter(name=name).exclude(task=task).update(task=task)
    return sorted(SCHEDULES)

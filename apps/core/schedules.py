"""The beat schedules of every app, upserted by name into django-celery-beat after every
`migrate` (so a deploy that only migrates has them) and by `setup_schedules`."""

from django.apps import apps as global_apps
from django.db import DEFAULT_DB_ALIAS, transaction
from django_celery_beat.models import IntervalSchedule, PeriodicTask

# name -> (celery task name, every N seconds). Apps add their periodic jobs here.
SCHEDULES: dict[str, tuple[str, int]] = {}


def register_schedule(*, name: str, task: str, every_seconds: int) -> None:
    SCHEDULES[name] = (task, every_seconds)


def schedules_upsert(*, using: str = DEFAULT_DB_ALIAS) -> list[str]:
    """Creates missing schedules; an existing one keeps the interval an operator set in the admin."""
    with transaction.atomic(using=using):
        for name, (task, every_seconds) in SCHEDULES.items():
            interval, _ = IntervalSchedule.objects.using(using).get_or_create(
                every=every_seconds, period=IntervalSchedule.SECONDS
            )
            PeriodicTask.objects.using(using).get_or_create(name=name, defaults={"task": task, "interval": interval})
            PeriodicTask.objects.using(using).filter(name=name).exclude(task=task).update(task=task)
    return sorted(SCHEDULES)


def schedules_after_migrate(*, using: str, apps=global_apps, **kwargs) -> None:
    """post_migrate receiver (`flush` sends it without `apps`)."""
    try:
        apps.get_model("django_celery_beat", "PeriodicTask")
    except LookupError:  # a partial migrate that has not reached django-celery-beat yet
        return
    schedules_upsert(using=using)

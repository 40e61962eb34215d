"""Beat entry point: lint runs through the pipeline, so it is retried, recorded and never twice at once."""

from celery import shared_task

from apps.profiles.services.entities import profiles_lint_enqueue


@shared_task(name="profiles.enqueue_lint")
def enqueue_lint() -> str:
    return str(profiles_lint_enqueue().pk)

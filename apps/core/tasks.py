from celery import shared_task


@shared_task(name="core.ping", ignore_result=False)
def ping(token: str) -> str:
    """A round-trip probe: a worker that runs this is consuming from the broker."""
    return f"pong:{token}"

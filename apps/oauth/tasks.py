from celery import shared_task

from apps.oauth.services import tokens_clear_expired


@shared_task(name="oauth.clear_expired_tokens")
def clear_expired_tokens() -> None:
    tokens_clear_expired()

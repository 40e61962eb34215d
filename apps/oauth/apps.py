from django.apps import AppConfig


class OAuthConfig(AppConfig):
    name = "apps.oauth"
    verbose_name = "OAuth"

    def ready(self):
        from apps.core.schedules import register_schedule

        register_schedule(
            name="oauth: delete expired tokens and codes", task="oauth.clear_expired_tokens", every_seconds=86400
        )

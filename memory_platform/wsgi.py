import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_platform.settings")

django_application = get_wsgi_application()

from memory_platform.embedded_db import start_embedded_database  # noqa: E402  (needs the settings)

# Each gunicorn worker (or the master with --preload) attaches to the embedded PostgreSQL at start,
# not on its first request.
start_embedded_database()

from django.conf import settings  # noqa: E402

from memory_platform.startup import refuse_to_start_on_errors  # noqa: E402

refuse_to_start_on_errors()

from apps.core.request_bodies import RequestBodies  # noqa: E402  (needs the settings configured above)

application = RequestBodies(
    django_application, slots=settings.WEB_REQUESTS_PER_WORKER, slots_per_key=settings.WEB_REQUESTS_PER_KEY
)

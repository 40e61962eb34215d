import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_platform.settings")

django_application = get_wsgi_application()

from apps.core.chunked import ChunkedBodies  # noqa: E402  (needs the settings configured above)

application = ChunkedBodies(django_application)

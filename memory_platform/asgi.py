import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_platform.settings")

application = get_asgi_application()

from memory_platform.embedded_db import start_embedded_database  # noqa: E402  (needs the settings)

start_embedded_database()

from memory_platform.startup import refuse_to_start_on_errors  # noqa: E402

refuse_to_start_on_errors()

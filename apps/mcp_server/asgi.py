"""`uvicorn apps.mcp_server.asgi:application`: the MCP endpoint, as `manage.py runmcp` serves it."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_platform.settings")
django.setup()

from apps.mcp_server.app import build_application  # noqa: E402  (needs the apps loaded)
from memory_platform.embedded_db import start_embedded_database  # noqa: E402
from memory_platform.startup import refuse_to_start_on_errors  # noqa: E402

start_embedded_database()
refuse_to_start_on_errors()

application = build_application()

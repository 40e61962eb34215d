"""Serve the MCP endpoint (streamable HTTP at /mcp) with uvicorn, beside the WSGI web server."""

import importlib.util
import os
import signal
import sys

import uvicorn
from django.core.management.base import BaseCommand, CommandError

from memory_platform.embedded_db import ATTACH_ENV, start_embedded_database


def _exit(signum, frame):
    sys.exit(0)


class Command(BaseCommand):
    help = "Serve the MCP endpoint (streamable HTTP) at http://BIND/mcp, authenticated by API key."

    def add_arguments(self, parser):
        parser.add_argument("--bind", default="127.0.0.1:8001", help="host:port (default 127.0.0.1:8001)")
        parser.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")

    def handle(self, *args, bind, workers, **options):
        if importlib.util.find_spec("memory_platform_client") is None:
            raise CommandError("The MCP tools come from the SDK: pip install ./clients/python (make install does).")
        host, _, port = bind.rpartition(":")
        if not host or not port.isdigit():
            raise CommandError(f"--bind must be host:port, not {bind!r}")
        if workers > 1:
            # Worker processes attach to this process's embedded PostgreSQL (if any) instead of owning it.
            start_embedded_database()
            os.environ.setdefault(ATTACH_ENV, "1")
        # uvicorn re-raises SIGTERM after a graceful stop: exit normally so atexit stops an embedded PostgreSQL.
        signal.signal(signal.SIGTERM, _exit)
        self.stdout.write(f"MCP endpoint: http://{bind}/mcp", ending="\n")
        self.stdout.flush()
        uvicorn.run(
            "apps.mcp_server.asgi:application",
            host=host.strip("[]"),
            port=int(port),
            workers=workers,
            lifespan="on",
            access_log=True,
            # Django's handlers filter user content out of the logs (apps.core.logs).
            log_config=None,
            # X-Forwarded-For behind a reverse proxy, as gunicorn does.
            proxy_headers=True,
        )

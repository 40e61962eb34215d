"""`manage.py heartbeat_check worker|beat`: exit 0 when this host's worker or beat has recorded a
heartbeat recently, 1 otherwise — the healthcheck of a worker or beat container (docker-compose.yml)."""

import socket

from django.core.management.base import BaseCommand, CommandError

from apps.pipeline.models import ProcessHeartbeat
from apps.pipeline.selectors import heartbeat_fresh


class Command(BaseCommand):
    help = "Exit 0 if this host's worker or beat has recorded a heartbeat within PROCESS_STALE_AFTER_SECONDS."

    def add_arguments(self, parser):
        parser.add_argument("kind", choices=ProcessHeartbeat.Kind.values)
        parser.add_argument("--host", default=socket.gethostname(), help="defaults to this machine's host name")

    def handle(self, *args, kind, host, **options):
        if not heartbeat_fresh(kind=kind, host=host):
            raise CommandError(f"no recent {kind} heartbeat from {host}")
        self.stdout.write(f"{kind} on {host}: ok")

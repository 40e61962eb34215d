"""`make run`: migrate, ensure the demo tenant, then serve web + MCP + workers + beat under a supervisor
that restarts whichever exits, until Ctrl-C. The children log to files under DATA_DIR/logs; the
terminal shows the summary once everything answers, then only warnings, errors and restarts."""

import http.client
import os
import signal
import sys
import time

import redis
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.utils import timezone

from apps.core.redis_clients import redis_client
from apps.pipeline.models import ProcessHeartbeat
from memory_platform.demo import demo_setup
from memory_platform.embedded_db import ATTACH_ENV, start_embedded_database
from memory_platform.supervisor import Child, Supervisor

READY_TIMEOUT_SECONDS = 120


def _redis_reachable(url: str) -> bool:
    client = redis_client(url, socket_connect_timeout=1, socket_timeout=1)
    try:
        client.ping()
        return True
    except redis.RedisError:
        return False
    finally:
        client.close()


def _answers(bind: str, path: str = "/healthz") -> bool:
    host, _, port = bind.rpartition(":")
    connection = http.client.HTTPConnection(host or "127.0.0.1", int(port), timeout=2)
    try:
        connection.request("GET", path)
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


def web_command(*, bind: str, workers: int) -> list[str]:
    """The web server's command line: the one place to change which HTTP server `make run` uses."""
    # gunicorn.conf.py: the gevent worker, header and body timeouts, the redacted access log.
    return [
        "gunicorn",
        "--config",
        str(settings.BASE_DIR / "gunicorn.conf.py"),
        "--bind",
        bind,
        "--workers",
        str(workers),
    ]


def webhook_worker_command(*, concurrency: int) -> list[str]:
    """The worker of the `webhooks` queue (apps.webhooks): a budget of its own, so a slow receiver holds
    webhook deliveries only."""
    return [
        "celery",
        "-A",
        "memory_platform",
        "worker",
        "-Q",
        "webhooks",
        "-n",
        "webhooks@%h",
        "-l",
        "INFO",
        "-c",
        str(concurrency),
    ]


class Command(BaseCommand):
    help = (
        "Run the whole platform in the foreground: API and admin, the MCP endpoint, a Celery worker, "
        "the webhook worker and beat."
    )

    def add_arguments(self, parser):
        parser.add_argument("--bind", default="127.0.0.1:8000")
        parser.add_argument("--mcp-bind", default="127.0.0.1:8001", help="where `runmcp` serves /mcp")
        parser.add_argument("--web-workers", type=int, default=2)
        parser.add_argument(
            "--concurrency",
            type=int,
            default=os.cpu_count() or 2,
            help="Celery worker processes (default: one per core; each embeds on one thread, EMBEDDING_THREADS).",
        )
        parser.add_argument(
            "--webhook-concurrency",
            type=int,
            default=2,
            help="processes of the webhook worker (the `webhooks` queue: deliveries only, never anyone's learning)",
        )

    def handle(self, *args, bind, mcp_bind, web_workers, concurrency, webhook_concurrency, **options):
        started = time.time()
        start_embedded_database()  # this process owns the embedded PostgreSQL; its children attach to it
        call_command("migrate", interactive=False, verbosity=0)  # also upserts the beat schedules
        demo = demo_setup(data_dir=settings.DATA_DIR)
        log_dir = settings.DATA_DIR / "logs"
        state_path = settings.DATA_DIR / "run" / "supervisor.json"
        self.stdout.write(
            f"Starting the memory platform; the web, MCP, worker, webhooks and beat logs go to {log_dir}/"
        )

        python = sys.executable
        bin_dir = os.path.dirname(python)
        # Children attach to this process's embedded PostgreSQL; this process stops it on exit.
        child_env = dict(os.environ, **{ATTACH_ENV: "1", "SUPERVISOR_STATE_FILE": str(state_path)})
        commands = {
            "web": web_command(bind=bind, workers=web_workers),
            "mcp": [python, str(settings.BASE_DIR / "manage.py"), "runmcp", "--bind", mcp_bind],
        }
        with_worker = _redis_reachable(settings.CELERY_BROKER_URL)
        if with_worker:
            commands["worker"] = ["celery", "-A", "memory_platform", "worker", "-l", "INFO", "-c", str(concurrency)]
            commands["webhooks"] = webhook_worker_command(concurrency=webhook_concurrency)
            commands["beat"] = ["celery", "-A", "memory_platform", "beat", "-l", "INFO"]
        else:
            self.stdout.write(
                self.style.WARNING(
                    f"Redis is not reachable at {settings.CELERY_BROKER_URL}; start one with "
                    "`redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save '' --appendonly no`. "
                    "Until then background tasks run in-process in the web server (no worker, no beat)."
                )
            )
            child_env["CELERY_TASK_ALWAYS_EAGER"] = "true"
        children = [
            Child(
                name=name,
                argv=[argv[0] if os.path.isabs(argv[0]) else os.path.join(bin_dir, argv[0]), *argv[1:]],
                log_path=log_dir / f"{name}.log",
                env=child_env,
            )
            for name, argv in commands.items()
        ]
        supervisor = Supervisor(children=children, state_path=state_path, say=self._say)

        def stop(*_):
            supervisor.stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        children_started = timezone.now()
        supervisor.start()
        try:
            waiting = self._wait_until_ready(
                supervisor, bind=bind, mcp_bind=mcp_bind, with_worker=with_worker, since=children_started
            )
            if not supervisor.stopping:
                self._summary(demo, bind=bind, mcp_bind=mcp_bind, seconds=time.time() - started, waiting=waiting)
                supervisor.run()
        finally:
            supervisor.stop()
        self.stdout.write("Stopped.")

    def _say(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()

    def _wait_until_ready(self, supervisor, *, bind, mcp_bind, with_worker, since) -> list[str]:
        """Polls until the web server and the MCP endpoint answer and the worker and beat have recorded
        a heartbeat since they started; returns what still does not answer after the timeout."""
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while not supervisor.stopping:
            supervisor.poll()
            waiting = []
            if not _answers(bind):
                waiting.append(f"the API on {bind}")
            if not _answers(mcp_bind):
                waiting.append(f"the MCP endpoint on {mcp_bind}")
            if with_worker:
                seen = set(ProcessHeartbeat.objects.filter(seen_at__gte=since).values_list("kind", flat=True))
                waiting += [f"the {kind}" for kind in ("worker", "beat") if kind not in seen]
            if not waiting or time.monotonic() > deadline:
                return waiting
            time.sleep(0.5)
        return []

    def _summary(self, demo, *, bind, mcp_bind, seconds, waiting) -> None:
        self.stdout.write(self.style.SUCCESS(f"Memory platform is running (ready in {seconds:.0f} s)."))
        self.stdout.write(f"  API:      http://{bind}/api/v1/   (docs: http://{bind}/api/docs/)")
        self.stdout.write(
            f"  Admin:    http://{bind}/admin/    user {demo.admin_username!r}, password {demo.admin_password!r}"
        )
        self.stdout.write(f"  MCP:      http://{mcp_bind}/mcp   (streamable HTTP, the same API key)")
        self.stdout.write(f"  API key:  {demo.api_key}   (organisation {demo.organization!r}, client {demo.client!r})")
        self.stdout.write(f"  Try:      curl -H 'Authorization: Api-Key {demo.api_key}' http://{bind}/api/v1/me")
        self.stdout.write(f"  Logs:     {settings.DATA_DIR / 'logs'}/   (warnings and errors are shown here too)")
        for what in waiting:
            self.stdout.write(self.style.WARNING(f"  Not answering yet after {READY_TIMEOUT_SECONDS} s: {what}"))
        self.stdout.write("Ctrl-C stops everything.")
        self.stdout.flush()

"""`make run`: migrate, ensure the demo tenant, then serve web + MCP + worker + beat until Ctrl-C."""

import os
import signal
import subprocess
import sys
import time

import redis
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from memory_platform.demo import demo_setup
from memory_platform.embedded_db import ATTACH_ENV, start_embedded_database


def _redis_reachable(url: str) -> bool:
    client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)
    try:
        client.ping()
        return True
    except redis.RedisError:
        return False
    finally:
        client.close()


class Command(BaseCommand):
    help = "Run the whole platform in the foreground: API and admin, the MCP endpoint, a Celery worker and beat."

    def add_arguments(self, parser):
        parser.add_argument("--bind", default="127.0.0.1:8000")
        parser.add_argument("--mcp-bind", default="127.0.0.1:8001", help="where `runmcp` serves /mcp")
        parser.add_argument("--web-workers", type=int, default=2)
        parser.add_argument("--concurrency", type=int, default=2, help="Celery worker processes.")

    def handle(self, *args, bind, mcp_bind, web_workers, concurrency, **options):
        start_embedded_database()  # this process owns the embedded PostgreSQL; its children attach to it
        call_command("migrate", interactive=False, verbosity=0)  # also upserts the beat schedules
        demo = demo_setup(data_dir=settings.DATA_DIR)
        self.stdout.write(self.style.SUCCESS("Memory platform is starting."))
        self.stdout.write(f"  API:      http://{bind}/api/v1/   (docs: http://{bind}/api/docs/)")
        self.stdout.write(f"  Admin:    http://{bind}/admin/    user {demo.admin_username!r}, password {demo.admin_password!r}")
        self.stdout.write(f"  MCP:      http://{mcp_bind}/mcp   (streamable HTTP, the same API key)")
        self.stdout.write(f"  API key:  {demo.api_key}   (organisation {demo.organization!r}, client {demo.client!r})")
        self.stdout.write(f"  curl -H 'Authorization: Api-Key {demo.api_key}' http://{bind}/api/v1/me")

        python = sys.executable
        # Children attach to this process's embedded PostgreSQL; this process stops it on exit.
        child_env = dict(os.environ, **{ATTACH_ENV: "1"})
        commands = []
        if _redis_reachable(settings.CELERY_BROKER_URL):
            commands.append(["celery", "-A", "memory_platform", "worker", "-l", "INFO", "-c", str(concurrency)])
            commands.append(["celery", "-A", "memory_platform", "beat", "-l", "INFO"])
        else:
            self.stdout.write(
                self.style.WARNING(
                    f"Redis is not reachable at {settings.CELERY_BROKER_URL}; start one with "
                    "`redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save '' --appendonly no`. "
                    "Until then background tasks run in-process in the web server (no worker, no beat)."
                )
            )
            child_env["CELERY_TASK_ALWAYS_EAGER"] = "true"
        commands.insert(
            0,
            ["gunicorn", "memory_platform.wsgi", "--bind", bind, "--workers", str(web_workers), "--threads", "4",
             "--access-logfile", "-", "--logger-class", "apps.core.access_log.AccessLogger"],
        )
        commands.insert(1, [python, str(settings.BASE_DIR / "manage.py"), "runmcp", "--bind", mcp_bind])
        bin_dir = os.path.dirname(python)
        processes = [
            # A session of their own: Ctrl-C reaches only this process, which stops them in order.
            subprocess.Popen(
                [os.path.join(bin_dir, command[0]), *command[1:]], env=child_env, start_new_session=True
            )
            for command in commands
        ]

        def stop(*_):
            for process in processes:
                if process.poll() is None:
                    process.send_signal(signal.SIGTERM)

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        try:
            while all(process.poll() is None for process in processes):
                time.sleep(0.5)
        finally:
            stop()
            deadline = time.monotonic() + 20
            for process in processes:
                try:
                    process.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    process.kill()
        self.stdout.write("Stopped.")

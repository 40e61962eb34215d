"""Every documented way to run the platform starts a consumer of the `webhooks` queue (without one,
deliveries wait): `make run` (runplatform), docker compose, the Kubernetes base and the plain deploy of
docs/operations.md."""

import re
from pathlib import Path

import yaml

from apps.webhooks.services import WEBHOOK_QUEUE
from memory_platform.management.commands.runplatform import webhook_worker_command
from tests.test_kubernetes import pod_spec, resources

BASE_DIR = Path(__file__).resolve().parents[2]


def _consumes_webhooks(argv: list[str]) -> bool:
    queues = argv[argv.index("-Q") + 1] if "-Q" in argv else ""
    return argv[:4] == ["celery", "-A", "memory_platform", "worker"] and WEBHOOK_QUEUE in queues.split(",")


def test_make_run_starts_a_webhook_worker():
    assert _consumes_webhooks(webhook_worker_command(concurrency=2))


def test_compose_starts_a_webhook_worker():
    services = yaml.safe_load((BASE_DIR / "docker-compose.yml").read_text())["services"]
    assert any(_consumes_webhooks(str(service.get("command", "")).split()) for service in services.values())


def test_the_kubernetes_base_runs_a_webhook_worker_with_a_liveness_probe():
    container = pod_spec(resources()[("Deployment", "webhooks")])["containers"][0]
    assert _consumes_webhooks(container["command"])
    assert container["livenessProbe"]["exec"]["command"] == ["python", "manage.py", "heartbeat_check", "worker"]


def test_the_plain_deploy_of_the_operations_guide_starts_one():
    guide = (BASE_DIR / "docs" / "operations.md").read_text()
    block = re.search(r"\*\*A plain deploy\*\*.*?```bash\n(.*?)```", guide, re.S).group(1)
    commands = [line.split("#")[0].split() for line in block.splitlines()]
    assert any(_consumes_webhooks(argv) for argv in commands if argv)

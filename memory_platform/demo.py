"""The demo tenant that `make run` prints: an organisation, a client and a superuser for local use."""

import json
import secrets
from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth import get_user_model
from django.db import transaction

from apps.tenancy.models import Client, Organization
from apps.tenancy.services import api_key_create, client_create, organization_create

DEMO_ORGANIZATION = "demo"
DEMO_CLIENT = "demo-agent"
DEMO_SCOPE = "default"
DEMO_ADMIN = "admin"


@dataclass
class Demo:
    organization: str
    client: str
    api_key: str
    admin_username: str
    admin_password: str


@transaction.atomic
def demo_setup(*, data_dir: Path) -> Demo:
    """Creates (once) a demo organisation, client and superuser for local use.

    The database only stores the key's hash; so that `make run` can print the same key
    every time, the demo credentials are kept in a local file under DATA_DIR (mode 0600).
    If that file is gone, a fresh key and password are issued.
    """
    credentials_file = data_dir / "demo-credentials.json"
    saved = json.loads(credentials_file.read_text()) if credentials_file.exists() else {}

    organization = Organization.objects.filter(name=DEMO_ORGANIZATION).first() or organization_create(
        name=DEMO_ORGANIZATION
    )
    client = Client.objects.filter(organization=organization, name=DEMO_CLIENT).first()
    api_key = saved.get("api_key")
    if client is None:
        client, api_key = client_create(
            organization=organization, name=DEMO_CLIENT, write_scope=DEMO_SCOPE, can_erase=True
        )
    elif not api_key or not client.api_keys.filter(prefix=api_key.split("_")[1], revoked_at__isnull=True).exists():
        _, api_key = api_key_create(client=client)

    users = get_user_model().objects
    password = saved.get("admin_password")
    admin = users.filter(username=DEMO_ADMIN).first()
    if admin is None or not password or not admin.check_password(password):
        password = secrets.token_urlsafe(12)
        if admin is None:
            users.create_superuser(DEMO_ADMIN, email="", password=password)
        else:
            admin.set_password(password)
            admin.save(update_fields=["password"])

    credentials_file.write_text(json.dumps({"api_key": api_key, "admin_password": password}))
    credentials_file.chmod(0o600)
    return Demo(
        organization=organization.name,
        client=client.name,
        api_key=api_key,
        admin_username=DEMO_ADMIN,
        admin_password=password,
    )

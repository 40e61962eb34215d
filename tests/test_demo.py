import pytest

from apps.tenancy.models import Client
from memory_platform.demo import DEMO_CLIENT, demo_setup

pytestmark = pytest.mark.django_db


def test_the_demo_client_may_erase_and_keeps_its_key(tmp_path):
    first = demo_setup(data_dir=tmp_path)
    client = Client.objects.get(name=DEMO_CLIENT)
    assert client.can_erase is True and client.write_scope == "default"
    assert demo_setup(data_dir=tmp_path).api_key == first.api_key

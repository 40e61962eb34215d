import pytest

from harness.fake_openai import fake_openai  # noqa: F401  (the scripted LLM server fixture)


@pytest.fixture
def rules(settings):
    """Offline: the temporal normaliser only."""
    settings.LLM_PROVIDER = "rules"
    return settings

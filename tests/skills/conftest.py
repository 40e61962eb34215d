import pytest

from harness.fake_openai import fake_openai  # noqa: F401  (the scripted LLM server fixture)


@pytest.fixture
def rules(settings):
    """The offline rule-based distiller and evolver."""
    settings.LLM_PROVIDER = "rules"
    return settings

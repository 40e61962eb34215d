from harness.fake_openai import fake_openai  # noqa: F401  (the scripted LLM server fixture)

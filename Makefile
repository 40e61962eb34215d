# The two commands that matter: `make run` and `make test`. Both install into .venv first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install run test lint fuzz bench clean chromium

# The SDK in clients/python is installed too: the platform's /mcp tools are defined there; its
# framework adapters' extras bring the frameworks their tests drive (tests/clients/test_adapters.py).
$(STAMP): pyproject.toml clients/python/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e './clients/python[mcp,langgraph,openai-agents,langchain,google-adk]' -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(PY) manage.py runplatform

# The browser tests drive Debian's Chromium, never a downloaded build; as root it is installed here.
chromium:
	@command -v chromium >/dev/null || [ "$$(id -u)" != 0 ] || (apt-get update -qq && apt-get install -y -qq chromium)

test: $(STAMP) chromium
	$(PY) -m pytest

# Lint, import order and formatting (ruff), and the layer contract between the apps (import-linter, pyproject.toml).
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-logo --no-cache

# The schemathesis run of `make test` (tests/test_openapi_fuzz.py) with a larger budget per operation.
FUZZ_MAX_EXAMPLES ?= 300
fuzz: $(STAMP)
	FUZZ_MAX_EXAMPLES=$(FUZZ_MAX_EXAMPLES) $(PY) -m pytest -rA tests/test_openapi_fuzz.py

BENCH_STAMP := $(VENV)/.installed-bench

$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	touch $(BENCH_STAMP)

# Local all-MiniLM-L6-v2 embeddings (CPU) for the retrieval benchmarks.
bench: $(BENCH_STAMP)
	EMBEDDING_PROVIDER=local $(PY) -m bench

clean:
	rm -rf $(VENV) .data

"""A local OpenAI-compatible HTTP server for tests: scripted chat completions and embeddings.

Tests queue what the "model" answers and read what it was asked; the real `openai` client
talks to it over HTTP, so request building, retries and parsing are exercised for real. A chat
request must ask for JSON: `json_object`, or `json_schema` with a named object schema (else it
answers 400, as a real endpoint does); with `refuse_json_schema` it answers 400 to a schema, as
an endpoint without structured output does.
"""

import json
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


class FakeOpenAI:
    def __init__(self):
        self.requests: list[dict] = []
        self._chat: deque = deque()
        self._lock = threading.Lock()
        # Called with the request's path, in the server's thread, before it answers.
        self.on_request = None
        self.refuse_json_schema = False
        # The answer of every chat completion once the scripted ones are used up (None: a 500).
        self.default_answer = None
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="fake-openai")

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> "FakeOpenAI":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    # Scripting ------------------------------------------------------------------------------

    def add_json(self, value, *, prompt_tokens: int = 100, completion_tokens: int = 20) -> None:
        """The next chat completion answers with this value serialised as JSON."""
        self.add_text(json.dumps(value), prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)

    def add_text(self, text: str, *, prompt_tokens: int = 100, completion_tokens: int = 20) -> None:
        """The next chat completion answers with this raw text (for garbage output)."""
        self._chat.append(("ok", text, prompt_tokens, completion_tokens))

    def add_error(self, status: int, message: str = "scripted error") -> None:
        """The next chat completion request fails with this HTTP status."""
        self._chat.append(("error", status, message, None))

    def chat_requests(self) -> list[dict]:
        return [request["body"] for request in self.requests if request["path"].endswith("/chat/completions")]

    @property
    def pending(self) -> int:
        return len(self._chat)

    # Serving --------------------------------------------------------------------------------

    def _next_chat(self):
        with self._lock:
            if not self._chat:
                if self.default_answer is not None:
                    return ("ok", json.dumps(self.default_answer), 100, 20)
                return ("error", 500, "FakeOpenAI: no scripted chat response left", None)
            return self._chat.popleft()

    def _handler_class(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                body = json.loads(raw or b"{}")
                with fake._lock:
                    fake.requests.append({"path": self.path, "body": body, "headers": dict(self.headers)})
                if fake.on_request is not None:
                    fake.on_request(self.path)
                if self.path.endswith("/chat/completions"):
                    self._chat(body)
                elif self.path.endswith("/embeddings"):
                    self._embeddings(body)
                else:
                    self._send(404, {"error": {"message": f"unknown path {self.path}"}})

            def _format_problem(self, response_format) -> str | None:
                kind = (response_format or {}).get("type")
                if kind == "json_object":
                    return None
                if kind != "json_schema":
                    return f"response_format must ask for JSON, not {kind!r}"
                if fake.refuse_json_schema:
                    return "response_format of type 'json_schema' is not supported by this model"
                spec = response_format.get("json_schema") or {}
                schema = spec.get("schema") or {}
                if not spec.get("name") or schema.get("type") != "object" or not schema.get("properties"):
                    return "response_format.json_schema needs a name and an object schema"
                return None

            def _chat(self, body):
                problem = self._format_problem(body.get("response_format"))
                if problem:
                    self._send(400, {"error": {"message": problem, "type": "invalid_request_error", "code": None}})
                    return
                kind, first, second, third = fake._next_chat()
                if kind == "error":
                    self._send(first, {"error": {"message": second, "type": "server_error", "code": None}})
                    return
                self._send(
                    200,
                    {
                        "id": f"chatcmpl-{len(fake.requests)}",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body.get("model", "fake"),
                        "choices": [
                            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": first}}
                        ],
                        "usage": {"prompt_tokens": second, "completion_tokens": third, "total_tokens": second + third},
                    },
                )

            def _embeddings(self, body):
                from apps.providers.embeddings import _hash_embed

                texts = body.get("input")
                texts = [texts] if isinstance(texts, str) else texts
                dimensions = body.get("dimensions") or 384
                self._send(
                    200,
                    {
                        "object": "list",
                        "model": body.get("model", "fake-embedding"),
                        "data": [
                            {"object": "embedding", "index": index, "embedding": _hash_embed(text, dimensions)}
                            for index, text in enumerate(texts)
                        ],
                        "usage": {"prompt_tokens": 1, "total_tokens": 1},
                    },
                )

        return Handler


@pytest.fixture
def fake_openai(settings):
    """A scripted FakeOpenAI; LLM_PROVIDER=openai points the real client at it. Import it into a conftest."""
    from apps.providers.llm import openai_client, schema_refusal_forget

    server = FakeOpenAI().start()
    schema_refusal_forget()
    settings.OPENAI_BASE_URL = server.base_url
    settings.OPENAI_API_KEY = "test-key"
    settings.LLM_PROVIDER = "openai"
    settings.LLM_MODEL = "fake-model"
    settings.LLM_MAX_RETRIES = 2
    settings.LLM_TIMEOUT_SECONDS = 5
    openai_client.cache_clear()
    yield server
    schema_refusal_forget()
    openai_client.cache_clear()
    server.stop()

"""The application slots of apps.core.request_bodies: a burst with one key queues behind itself."""

import io
import threading

from apps.core.request_bodies import RequestBodies


class HoldingApplication:
    """Answers each request when released, counting how many run at once per key."""

    def __init__(self):
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.running: dict[str, int] = {}
        self.most: dict[str, int] = {}
        self.started = threading.Semaphore(0)

    def __call__(self, environ, start_response):
        key = environ.get("HTTP_AUTHORIZATION", "")
        with self.lock:
            self.running[key] = self.running.get(key, 0) + 1
            self.most[key] = max(self.most.get(key, 0), self.running[key])
        self.started.release()
        if key != "Api-Key other":
            self.release.wait(timeout=30)
        with self.lock:
            self.running[key] -= 1
        start_response("200 OK", [])
        return [b"ok"]


def _get(application, key: str, answers: list) -> None:
    environ = {"REQUEST_METHOD": "GET", "HTTP_AUTHORIZATION": key, "wsgi.input": io.BytesIO()}
    answers.append(b"".join(application(environ, lambda status, headers: None)))


def test_one_key_holds_at_most_its_share_of_the_slots_and_another_tenant_still_gets_in():
    inner = HoldingApplication()
    application = RequestBodies(inner, slots=3, slots_per_key=2)
    answers = []
    greedy = [threading.Thread(target=_get, args=(application, "Api-Key greedy", answers)) for _ in range(6)]
    for thread in greedy:
        thread.start()
    inner.started.acquire(timeout=10)
    inner.started.acquire(timeout=10)

    _get(application, "Api-Key other", answers)  # answered while the greedy key's requests hold
    inner.release.set()
    for thread in greedy:
        thread.join(timeout=30)

    assert answers[0] == b"ok" and len(answers) == 7
    assert inner.most == {"Api-Key greedy": 2, "Api-Key other": 1}
    assert application.key_slots == {}  # nothing kept per key once its requests are done

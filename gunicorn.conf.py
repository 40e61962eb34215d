"""gunicorn's settings for every way the API is served: `make run` (runplatform), the compose file
and a plain `gunicorn memory_platform.wsgi` started in this folder (gunicorn reads ./gunicorn.conf.py
by itself). Command-line flags override what is set here.

Slow clients: the gevent worker reads each connection in a greenlet, so a client trickling its
headers or body holds a few kilobytes, never one of a fixed set of threads (the gthread worker
this replaces gave 2 x 4 threads to 12 slow sockets and starved everyone else; docs/decisions.md,
bench/privacy/slow_clients.py). A request's headers must arrive within `keepalive` seconds (the
gevent worker bounds every header read by it); its body within REQUEST_BODY_TIMEOUT_SECONDS, and
at most WEB_REQUESTS_PER_WORKER requests per process run the application at once
(apps.core.request_bodies).
"""

import os

wsgi_app = "memory_platform.wsgi"
worker_class = "gevent"
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
# Open connections per worker process (idle, slow or being served); beyond it they wait in the backlog.
worker_connections = int(os.environ.get("WEB_MAX_CONNECTIONS", "1000"))
# Seconds a kept-alive connection may idle, and the time a client has to send a request's headers.
keepalive = int(os.environ.get("WEB_HEADER_TIMEOUT_SECONDS", "5"))
timeout = int(os.environ.get("WEB_WORKER_TIMEOUT_SECONDS", "120"))

# Greenlets do not share a database connection, and a persistent one would stay open with every idle
# keep-alive connection: each request borrows one from the process's pool and returns it when it ends.
# Set here, before the settings are read.
os.environ.setdefault("CONN_MAX_AGE", "0")
os.environ.setdefault("DATABASE_POOL", "1")

# The access log names the route a request matched, never its path or query string.
accesslog = "-"
logger_class = "apps.core.access_log.AccessLogger"

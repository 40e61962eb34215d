FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY memory_platform ./memory_platform
COPY apps ./apps
COPY templates ./templates
COPY manage.py gunicorn.conf.py ./
# The SDK: the /mcp endpoint's tools are defined there (memory_platform_client.mcp_server).
COPY clients/python ./clients/python
RUN pip install --no-cache-dir ./clients/python ".[rerank]"
# 8000: API and admin (gunicorn); 8001: the MCP endpoint (`python manage.py runmcp --bind 0.0.0.0:8001`).
EXPOSE 8000 8001
# gunicorn reads ./gunicorn.conf.py (the gevent worker: slow clients cannot starve it).
CMD ["gunicorn", "--config", "gunicorn.conf.py", "--bind", "0.0.0.0:8000", "--workers", "3"]

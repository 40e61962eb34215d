FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY memory_platform ./memory_platform
COPY apps ./apps
COPY templates ./templates
COPY manage.py ./
RUN pip install --no-cache-dir .
EXPOSE 8000
CMD ["gunicorn", "memory_platform.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", "--threads", "4"]

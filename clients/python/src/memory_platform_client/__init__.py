"""Python client for the Memory Platform's REST API, and its MCP server for stdio hosts."""

__version__ = "0.1.0"

from memory_platform_client._http import Retries  # noqa: E402
from memory_platform_client.client import AsyncMemoryClient, MemoryClient  # noqa: E402
from memory_platform_client.errors import (  # noqa: E402
    APIConnectionError,
    APIError,
    AuthenticationError,
    ConflictError,
    MemoryPlatformError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RateLimitError,
    ServerError,
    TaskTimeoutError,
    ValidationError,
)

__all__ = [
    "APIConnectionError",
    "APIError",
    "AsyncMemoryClient",
    "AuthenticationError",
    "ConflictError",
    "MemoryClient",
    "MemoryPlatformError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "RateLimitError",
    "Retries",
    "ServerError",
    "TaskTimeoutError",
    "ValidationError",
]

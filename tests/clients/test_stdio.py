"""`memory-platform-mcp` (the stdio entry point) as an MCP host runs it; the tools themselves are
tested over both transports in tests/mcp_server/test_tools.py."""

import subprocess

import pytest

from harness.processes import free_port
from tests.mcp_server.mcp_client import CONSOLE_SCRIPT, call, stdio_transport, text

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_bad_key_is_a_clear_tool_error(live_server):
    result = call(stdio_transport(live_server.url, "mp_abcdefgh_wrong"), "list_sessions")

    assert result.is_error
    assert "Not authenticated (401 authentication_failed): Invalid or revoked API key." in text(result)


def test_an_unreachable_platform_is_a_clear_tool_error(live_server, client_a):
    result = call(stdio_transport(f"http://127.0.0.1:{free_port()}", client_a.raw_key), "list_sessions")

    assert result.is_error and "The memory platform could not be reached" in text(result)


def test_it_refuses_to_start_without_url_and_key():
    result = subprocess.run([CONSOLE_SCRIPT], capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})

    assert result.returncode == 2
    assert "set MEMORY_PLATFORM_URL and MEMORY_PLATFORM_API_KEY" in result.stderr

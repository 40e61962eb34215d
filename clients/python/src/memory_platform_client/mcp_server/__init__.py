"""MCP server: the tools (shared with the platform's /mcp endpoint) and the stdio entry point."""

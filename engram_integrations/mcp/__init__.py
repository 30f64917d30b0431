"""engram's MCP server (``pip install 'engram-grpc[mcp]'``; run it as ``engram mcp``): tools recall, remember,
forget, confirm, history and list over a running engram server, through the SDK."""

from __future__ import annotations

from engram_integrations.mcp.server import Backend, build_server, http_app, serve_http, serve_stdio
from engram_integrations.mcp.tools import TOOLS

__all__ = ["TOOLS", "Backend", "build_server", "http_app", "serve_http", "serve_stdio"]

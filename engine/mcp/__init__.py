"""Tools from MCP (Model Context Protocol) servers the user adds: their config (``config.py``), one
connection per server (``connection.py``), the hub that reaches them all from plain threads
(``toolhub.py``), their results as untrusted text (``results.py``) and the chat tool loop (``loop.py``).
Built on the official ``mcp`` SDK; never imports Qt."""

from .config import McpConfig, McpServer
from .connection import Timeouts
from .results import McpTool, ToolResult
from .toolhub import McpHub, ServerStatus

__all__ = ["McpConfig", "McpHub", "McpServer", "McpTool", "ServerStatus", "Timeouts", "ToolResult"]

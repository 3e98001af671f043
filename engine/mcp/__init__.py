"""Tools from MCP (Model Context Protocol) servers the user adds: their config (``config.py``), one
connection per server (``connection.py``), the hub that reaches them all from plain threads
(``toolhub.py``), their results as untrusted text (``results.py``) and the chat tool loop (``loop.py``).
Built on the official ``mcp`` SDK; never imports Qt.

Offers the names in ``__all__``; each loads its module on first use.
"""

from __future__ import annotations

from ..faces import lazy

# name -> the inner module that holds it (a name equal to its module's is the module itself)
_WHERE = {
    "McpConfig": "config",
    "McpServer": "config",
    "Timeouts": "connection",
    "McpTool": "results",
    "ToolResult": "results",
    "McpHub": "toolhub",
    "ServerStatus": "toolhub",
    "PendingCall": "loop",
    "ToolLoop": "loop",
    "ToolStep": "loop",
    "import_file": "imports",
    "known_configs": "imports",
}
__all__ = ["McpConfig", "McpHub", "McpServer", "McpTool", "PendingCall", "ServerStatus", "Timeouts",
           "ToolLoop", "ToolResult", "ToolStep", "import_file", "known_configs"]
__getattr__, __dir__ = lazy(__name__, _WHERE)

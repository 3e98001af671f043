"""The MCP servers a user has added, kept in ``mcp.json`` in the config folder.

The file uses the ``mcpServers`` shape that Claude Desktop, LM Studio and Jan use, so a config copied
from one of them works when pasted in::

    {"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
                  "env": {"DEBUG": "1"}},
        "web":   {"url": "http://127.0.0.1:9000/mcp", "tokenInKeyring": true}}}

An entry with ``command`` runs a local process over stdio; one with ``url`` speaks Streamable HTTP.
``disabled: true`` (Claude Code, Cursor) or ``active: false`` (Jan) keeps an entry without starting it;
``timeout`` (seconds) bounds its tool calls. A bearer token added with ``fireside mcp add --token``
lives in the OS keyring under the service ``Fireside MCP servers`` and the server's name, never in the
file (``tokenInKeyring`` only records that one is there); ``headers`` pasted from another app are
sent as written. Keys Fireside does not know are kept when the file is rewritten. Thread-safe; the
file is re-read on every call, so an edit shows up without a restart.
"""

from __future__ import annotations

import json
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..errors import McpServerError
from ..secrets import SecretStore
from ..settings import Settings

KEYRING_SERVICE = "Fireside MCP servers"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


@dataclass
class McpServer:
    """One configured server: a command to run (stdio) or a URL (Streamable HTTP)."""

    name: str
    command: str = ""
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    has_token: bool = False
    disabled: bool = False
    timeout_s: float | None = None

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"

    def describe(self) -> str:
        """What this server is, in words a user can check: the exact command line, or the URL."""
        if self.url:
            return self.url
        import shlex

        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        return (env + " " if env else "") + shlex.join([self.command, *self.args])


def check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise McpServerError(f"{name!r} is not a usable MCP server name: use letters, digits, '.', '_' or '-' "
                             f"(at most 63), starting with a letter or digit")
    return name


def parse_entry(name: str, raw: Any) -> McpServer:
    """One ``mcpServers`` entry as a server; ``McpServerError`` says what is wrong with a bad one."""
    if not isinstance(raw, dict):
        raise McpServerError(f"MCP server {name!r}: its entry must be a JSON object")
    url, command = raw.get("url") or raw.get("serverUrl") or "", raw.get("command") or ""
    if raw.get("type") == "sse" or (url and not command and str(url).rstrip("/").endswith("/sse")):
        raise McpServerError(f"MCP server {name!r} uses the old SSE transport; Fireside speaks Streamable HTTP")
    if bool(url) == bool(command):
        raise McpServerError(f"MCP server {name!r} needs either a \"command\" or a \"url\"")
    args, env, headers = raw.get("args") or [], raw.get("env") or {}, raw.get("headers") or {}
    if not (isinstance(args, list) and isinstance(env, dict) and isinstance(headers, dict)):
        raise McpServerError(f"MCP server {name!r}: \"args\" must be a list, \"env\" and \"headers\" objects")
    if url:
        parts = urlsplit(str(url))
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise McpServerError(f"MCP server {name!r}: {url!r} is not an http:// or https:// URL")
    timeout = raw.get("timeout")
    return McpServer(name=name, command=str(command), args=[str(a) for a in args],
                     env={str(k): str(v) for k, v in env.items()}, url=str(url),
                     headers={str(k): str(v) for k, v in headers.items()}, has_token=bool(raw.get("tokenInKeyring")),
                     disabled=bool(raw.get("disabled")) or raw.get("active") is False,
                     timeout_s=float(timeout) if isinstance(timeout, (int, float)) and timeout > 0 else None)


def to_entry(server: McpServer) -> dict[str, Any]:
    entry: dict[str, Any] = {"url": server.url} if server.url else {"command": server.command, "args": server.args}
    if server.env:
        entry["env"] = server.env
    if server.headers:
        entry["headers"] = server.headers
    if server.has_token:
        entry["tokenInKeyring"] = True
    if server.disabled:
        entry["disabled"] = True
    if server.timeout_s:
        entry["timeout"] = server.timeout_s
    return entry


class TokenStore(SecretStore):
    """Bearer tokens in the OS keyring, one entry per server name, under ``secrets.py``'s error policy."""

    def __init__(self):
        super().__init__(KEYRING_SERVICE, McpServerError, "token of MCP server", "add the server without --token")


class McpConfig:
    """``mcp.json`` plus the token store (``TokenStore`` unless a test passes its own)."""

    def __init__(self, settings: Settings, tokens: TokenStore | None = None):
        self.path = Path(settings.config_dir) / "mcp.json"
        self.tokens = tokens or TokenStore()
        self._lock = threading.Lock()

    def list(self) -> list[McpServer]:
        with self._lock:
            raw = self._read()
        return [parse_entry(name, entry) for name, entry in raw.get("mcpServers", {}).items()]

    def get(self, name: str) -> McpServer:
        with self._lock:
            entry = self._read().get("mcpServers", {}).get(name)
        if entry is None:
            raise McpServerError(f"no MCP server named {name!r}: `fireside mcp ls` lists them, "
                                 f"`fireside mcp add NAME -- COMMAND` adds one")
        return parse_entry(name, entry)

    def add(self, server: McpServer, token: str | None = None) -> McpServer:
        """Add (or replace) a server; its token, if given, goes to the OS keyring."""
        check_name(server.name)
        server.has_token = bool(token)
        parse_entry(server.name, to_entry(server))  # the same checks a pasted entry gets
        if token:
            self.tokens.set(server.name, token)
        with self._lock:
            raw = self._read()
            raw.setdefault("mcpServers", {})[server.name] = to_entry(server)
            self._write(raw)
        if not token:
            self.tokens.delete(server.name)
        return server

    def remove(self, name: str) -> McpServer:
        with self._lock:
            raw = self._read()
            entry = raw.get("mcpServers", {}).pop(name, None)
            if entry is None:
                raise McpServerError(f"no MCP server named {name!r}")
            self._write(raw)
        self.tokens.delete(name)
        return parse_entry(name, entry)

    def token(self, server: McpServer) -> str | None:
        return self.tokens.get(server.name) if server.has_token else None

    def _read(self) -> dict[str, Any]:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {"mcpServers": {}}
        except (OSError, ValueError) as exc:
            raise McpServerError(f"{self.path} cannot be read ({exc}); fix or delete it") from None
        if not isinstance(raw, dict) or not isinstance(raw.get("mcpServers", {}), dict):
            raise McpServerError(f"{self.path} must hold an object with \"mcpServers\": {{NAME: {{...}}}}")
        return raw

    def _write(self, raw: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(raw, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)

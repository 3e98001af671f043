"""Import MCP servers from the apps a user may already have set them up in: Claude Desktop, LM Studio
and Jan all keep an ``mcpServers`` object in a JSON file of their own.

``known_configs(home)`` lists the files that exist under ``home`` (the user's home folder, passed in so
tests can point it anywhere); ``import_file(config, path)`` copies their entries into Fireside's
``mcp.json``. Entries whose name Fireside already has are left alone unless ``replace``; entries
Fireside cannot use (an SSE server, a name it cannot keep) are reported, not copied. Nothing is
started: an imported stdio server runs only when a chat uses it, after ``fireside mcp ls`` has shown
its command.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import McpServerError
from .config import McpConfig, check_name, parse_entry

_CANDIDATES = {
    "Claude Desktop": [".config/Claude/claude_desktop_config.json",
                       "Library/Application Support/Claude/claude_desktop_config.json",
                       "AppData/Roaming/Claude/claude_desktop_config.json"],
    "LM Studio": [".lmstudio/mcp.json"],
    "Jan": [".local/share/Jan/data/mcp_config.json", "Library/Application Support/Jan/data/mcp_config.json",
            "AppData/Roaming/Jan/data/mcp_config.json"],
}


@dataclass
class ImportReport:
    source: Path
    added: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # already in Fireside's file, left alone
    refused: dict[str, str] = field(default_factory=dict)  # name -> why it cannot be used


def known_configs(home: Path) -> list[tuple[str, Path]]:
    """The other apps' MCP config files that exist under ``home``, as (app, path)."""
    return [(app, home / rel) for app, rels in _CANDIDATES.items() for rel in rels if (home / rel).is_file()]


def import_file(config: McpConfig, path: Path, replace: bool = False) -> ImportReport:
    """Copy the ``mcpServers`` entries of ``path`` into ``config``."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise McpServerError(f"{path} cannot be read as JSON ({exc})") from None
    entries = raw.get("mcpServers") if isinstance(raw, dict) else None
    if not isinstance(entries, dict):
        raise McpServerError(f"{path} has no \"mcpServers\" object")
    report = ImportReport(Path(path))
    have = {s.name for s in config.list()}
    for name, entry in entries.items():
        if name in have and not replace:
            report.kept.append(name)
            continue
        try:
            server = parse_entry(check_name(name), entry)
        except McpServerError as exc:
            report.refused[name] = str(exc)
            continue
        config.add(server)
        report.added.append(name)
    return report

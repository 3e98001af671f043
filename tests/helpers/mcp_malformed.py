"""A hand-written stdio "MCP server" that speaks the protocol badly on purpose: it completes the
handshake, then lists a tool with no name, answers ``shape`` with content that is not a list, and
answers ``noise`` with a line that is not JSON and never a reply. Argument ``--good-list`` makes its
tool list valid, so the bad calls can be reached."""

from __future__ import annotations

import json
import sys


def reply(msg_id, result) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": result}) + "\n")
    sys.stdout.flush()


def answer(msg: dict, good_list: bool) -> None:
    method, params = msg.get("method"), msg.get("params") or {}
    if method == "initialize":
        reply(msg["id"], {"protocolVersion": params.get("protocolVersion"), "capabilities": {"tools": {}},
                          "serverInfo": {"name": "malformed", "version": "0"}})
    elif method == "tools/list":
        tools = [{"name": "shape", "inputSchema": {"type": "object"}},
                 {"name": "noise", "inputSchema": {"type": "object"}}]
        reply(msg["id"], {"tools": tools if good_list else tools + [{"description": "a tool with no name"}]})
    elif method == "tools/call" and params.get("name") == "shape":
        reply(msg["id"], {"content": "this should have been a list of parts"})
    elif method == "tools/call":
        sys.stdout.write("<<this line is not JSON-RPC>>\n")
        sys.stdout.flush()


def main() -> None:
    good_list = "--good-list" in sys.argv
    for line in sys.stdin:
        msg = json.loads(line)
        if "id" in msg:
            answer(msg, good_list)


if __name__ == "__main__":
    main()

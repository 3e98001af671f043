"""Export a conversation as Markdown (the thread shown) or JSON (every message, branches included).

Both are pure functions of the store's contents, so they can run anywhere and be tested without Qt.
A tool call is exported with its server, tool, arguments, outcome and result (in Markdown, as fenced
blocks, so a result is shown as the text it is; in JSON, as the message's ``tool`` field). A message's
images are exported in Markdown as relative links, ``![image 1](<NAME-images/FILE>)``, into a folder
beside the file that ``save`` copies them to (the export stays readable, and small, without them
embedded); JSON names them in each message's ``images``. A reply grounded in documents is followed
by its numbered sources (file, page or heading, the passage quoted), and your message names the
documents you attached; JSON keeps them as each message's ``documents`` and ``sources``.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from fireside.engine.documents import cited, source_label
from fireside.engine.fsutil import atomic_write

from .store import Store

SHOWN = 5  # sources quoted per reply besides the cited ones (as the Chat page lists them)


def images_folder(path: Path | str) -> str:
    """The folder beside a Markdown export that holds its images: ``chat.md`` -> ``chat-images``."""
    return f"{Path(path).stem}-images"


def image_names(store: Store, conv_id: int) -> list[str]:
    """The image files of the thread shown, each once, in order."""
    return list(dict.fromkeys(name for m in store.thread(conv_id) for name in m.images))


def to_markdown(store: Store, conv_id: int, images: str = "images") -> str:
    """The thread shown; its images linked as ``images/FILE`` (``images``: the folder, relative to the file)."""
    conv = store.conversation(conv_id)
    lines = [f"# {conv.title}", ""]
    if conv.model_id:
        lines += [f"*Model: {conv.model_id}*", ""]
    if conv.system_prompt:
        lines += ["**System**", "", conv.system_prompt, ""]
    for msg in store.thread(conv_id):
        if msg.role == "tool":
            lines += _tool_call(msg)
        elif msg.content.strip() or not msg.tool.get("calls"):  # a reply that only made calls shows as them
            who = "You" if msg.role == "user" else (msg.model_id or "Assistant")
            lines += [f"**{who}**", ""] + [f"![image {i}](<{images}/{name}>)" for i, name in enumerate(msg.images, 1)]
            lines += ([""] if msg.images else []) + [msg.content.rstrip(), ""]
            if msg.documents:
                lines += ["Attached: " + ", ".join(d["file"] for d in msg.documents), ""]
            lines += _sources(msg.sources, msg.content)
    return "\n".join(lines).rstrip() + "\n"


def _sources(sources: dict, reply: str) -> list[str]:
    """A reply's sources as the app lists them: ``[n] where`` and the passage as a quote, the cited ones
    first, then the best matches for the question (``SHOWN``; a document given whole gave every passage:
    the rest are counted, and the JSON export has them all), with how passages were found."""
    items = (sources or {}).get("items") or []
    if not items:
        return []
    order = cited(reply, max(s["n"] for s in items))
    by_n = {s["n"]: s for s in items}
    rows = [by_n[n] for n in order if n in by_n] + sorted(
        (s for s in items if s["n"] not in order), key=lambda s: (s.get("rank", s["n"]), s["n"]))
    shown = rows[:max(SHOWN, len(order))]
    lines = ["Sources:", ""]
    if sources.get("note"):
        lines += [f"*{sources['note']}*", ""]
    for s in shown:
        lines.append(f"[{s['n']}] {source_label(s)}")
        lines += [""] + ["> " + line if line.strip() else ">" for line in s["text"].splitlines()] + [""]
    if len(rows) > len(shown):
        lines += [f"*...and {len(rows) - len(shown)} more passages of documents given whole.*", ""]
    return lines


def _fence(text: str) -> str:
    """A backtick fence longer than any run of backticks in ``text``, so the text cannot close it."""
    run = best = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        best = max(best, run)
    return "`" * max(3, best + 1)


def _tool_call(msg) -> list[str]:
    tool = msg.tool
    outcome = tool.get("outcome") or msg.state
    arguments = tool.get("arguments") or "{}"
    lines = [f"**Tool call: {tool.get('server', '?')} › {tool.get('tool', '?')}** ({outcome})", "",
             "Arguments:", "", _fence(arguments) + "json", arguments, _fence(arguments), ""]
    if msg.content:
        fence = _fence(msg.content)
        lines += ["Result:", "", fence + "text", msg.content.rstrip(), fence, ""]
    return lines


def to_json(store: Store, conv_id: int) -> str:
    conv = store.conversation(conv_id)
    data = {
        "format": "fireside-chat", "version": 1,
        "conversation": asdict(conv),
        "thread": [m.id for m in store.thread(conv_id)],
        "messages": [asdict(m) for m in store.all_messages(conv_id)],
    }
    return json.dumps(data, indent=2, ensure_ascii=False)


def save(path: Path | str, text: str, images: list[Path] | tuple = ()) -> Path:
    """Write an export durably and whole: a crash mid-write leaves any earlier file at ``path`` intact.
    ``images`` (saved image files) are copied into ``images_folder(path)`` first, so every link works
    once the export exists."""
    path = Path(path)
    for image in images:
        atomic_write(path.parent / images_folder(path) / image.name, image.read_bytes())
    return atomic_write(path, text)

"""Markdown to the rich text a ``QTextBrowser`` shows, with highlighted code blocks and copy links.

Qt renders CommonMark itself (``QTextDocument.setMarkdown``) but leaves code blocks plain, so a reply is
cut at its fenced code blocks: prose goes through Qt's Markdown reader, code through Pygments (when it
is installed and the fence names a language; plain monospace otherwise), and each code block gets a
"Copy" link whose href ``copy:N`` names the block. An unclosed fence (a reply still streaming) is shown as code so far.

Raw HTML in a reply is shown as the text it is, never interpreted: a model that writes ``<think>`` or
``<div>`` would otherwise make its words vanish (Qt's reader takes them as markup). Your own messages are
not Markdown at all; ``plain`` shows them exactly as typed.
"""

from __future__ import annotations

import functools
import html
import re
from dataclasses import dataclass

from PySide6.QtGui import QTextDocument

FENCE = re.compile(r"^```[ \t]*([\w+#.-]*)[^\n]*\n(.*?)(?:^```[ \t]*$|\Z)", re.MULTILINE | re.DOTALL)
_BODY = re.compile(r"<body[^>]*>(.*)</body>", re.DOTALL)
_FEATURES = QTextDocument.MarkdownDialectGitHub | QTextDocument.MarkdownNoHTML


@dataclass
class Rendered:
    html: str
    code_blocks: list[str]


def render(text: str, dark: bool = False) -> Rendered:
    """Rich text for ``text``; ``code_blocks[n]`` is the source behind the link ``copy:n``."""
    parts: list[str] = []
    blocks: list[str] = []
    pos = 0
    for m in FENCE.finditer(text):
        parts.append(_prose(text[pos:m.start()]))
        code = m.group(2).rstrip("\n")
        parts.append(_code(code, m.group(1), len(blocks), dark))
        blocks.append(code)
        pos = m.end()
    parts.append(_prose(text[pos:]))
    return Rendered("".join(parts), blocks)


def plain(text: str) -> Rendered:
    """Rich text that shows ``text`` exactly as typed: no Markdown, no HTML, line breaks kept."""
    return Rendered(f'<p style="white-space:pre-wrap;">{html.escape(text)}</p>' if text else "", [])


def _prose(text: str) -> str:
    if not text.strip():
        return ""
    doc = QTextDocument()
    doc.setMarkdown(text, _FEATURES)
    m = _BODY.search(doc.toHtml())
    return m.group(1) if m else html.escape(text)


def _code(code: str, language: str, index: int, dark: bool) -> str:
    bg, fg = ("#1e1f24", "#e6e6e6") if dark else ("#f4f4f6", "#1e1e1e")
    label = html.escape(language or "code")
    head = (f'<table width="100%" cellspacing="0" cellpadding="2"><tr>'
            f'<td><span style="color:#888;">{label}</span></td>'
            f'<td align="right"><a href="copy:{index}">Copy</a></td></tr></table>')
    body = _highlight(code, language, dark)
    return (f'{head}<table width="100%" cellspacing="0" cellpadding="8" style="background-color:{bg};">'
            f'<tr><td><pre style="color:{fg}; font-family:monospace; white-space:pre-wrap;">{body}</pre></td></tr></table>')


def _highlight(code: str, language: str, dark: bool) -> str:
    lexer = _lexer(language.lower()) if language else None
    if lexer is None:  # no language, an unknown one, or no Pygments: plain monospace reads fine
        return html.escape(code)
    from pygments import highlight

    return highlight(code, lexer, _formatter(dark)).rstrip("\n")


@functools.lru_cache(maxsize=64)
def _lexer(language: str):
    """The lexer for ``language``, or None; cached, misses too (a streamed reply is re-rendered several
    times a second, and looking up an unknown name walks every Pygments plugin)."""
    if language not in _aliases():
        return None
    from pygments.lexers import get_lexer_by_name

    return get_lexer_by_name(language)


@functools.lru_cache(maxsize=1)
def _aliases() -> frozenset[str]:
    """Pygments' built-in lexer names. Only these are looked up: an unknown name would make Pygments
    scan every installed package's entry points (over a second, on the GUI thread)."""
    try:
        from pygments.lexers import get_all_lexers
    except ImportError:
        return frozenset()
    return frozenset(alias for _name, aliases, _files, _mimes in get_all_lexers(plugins=False) for alias in aliases)


@functools.lru_cache(maxsize=2)
def _formatter(dark: bool):
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(nowrap=True, noclasses=True, style="monokai" if dark else "default")

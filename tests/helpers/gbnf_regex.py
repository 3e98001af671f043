"""A GBNF grammar without recursion as one Python regular expression, to ask "does this grammar admit
this exact text?" in a test, without a model. Covers what the JSON-schema converter emits for flat
schemas: literals, character classes, rule references, groups, alternation and repetition."""

from __future__ import annotations

import re

_TOKEN = re.compile(r'\s*("(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]|\{\d*(?:,\d*)?\}|[a-zA-Z0-9-]+|[()|*+?])', re.S)
_ESC = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]", "-": "-", "/": "/"}


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\":
            kind = text[i + 1]
            width = {"x": 2, "u": 4, "U": 8}.get(kind)
            if width:
                out.append(chr(int(text[i + 2:i + 2 + width], 16)))
                i += 2 + width
            else:
                out.append(_ESC[kind])
                i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _class(token: str) -> str:
    negated = token.startswith("[^")
    inner = token[2 if negated else 1:-1]
    out, i = [], 0
    while i < len(inner):
        if inner[i] == "\\":
            j = i + 2 + {"x": 2, "u": 4, "U": 8}.get(inner[i + 1], 0)
            out.append(re.escape(_unescape(inner[i:j])))
            i = j
        else:
            out.append("-" if inner[i] == "-" else re.escape(inner[i]))
            i += 1
    return f"[{'^' if negated else ''}{''.join(out)}]"


def to_regex(grammar: str) -> re.Pattern:
    rules = {}
    for line in grammar.strip().splitlines():
        name, _, body = line.partition("::=")
        rules[name.strip()] = body.strip()

    def expand(name: str, depth: int = 0) -> str:
        assert depth < 50, "recursive grammar"
        parts = []
        for token in _TOKEN.findall(rules[name]):
            if token.startswith('"'):
                parts.append(re.escape(_unescape(token[1:-1])))
            elif token.startswith("["):
                parts.append(_class(token))
            elif token[0] in "()|*+?{":
                parts.append(token)
            else:
                parts.append(f"(?:{expand(token, depth + 1)})")
        return "".join(parts)

    return re.compile(expand("root"), re.S)


def admits(grammar: str, text: str) -> bool:
    return to_regex(grammar).fullmatch(text) is not None

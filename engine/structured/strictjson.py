"""JSON Schema to GBNF, strict: the grammar admits only text that ``json.loads`` (and pydantic) accept.

llama-cpp-python's converter (a port of llama.cpp's) has three holes, each seen or reproduced here:
its ``char`` rule is ``[^"\\\\]``, so a string may hold a raw newline or any other control character
(llama.cpp's own converter excludes ``\\x00-\\x1F`` and ``\\x7F``); it writes ``const``/``enum``
strings and property names into the grammar without escaping their backslashes, so ``"a\\nb"``
becomes a raw newline; and a ``pattern`` turns into grammar pieces that may emit a raw ``"``, ``\\``
or control character inside the JSON string (``.``, ``[^x]``, ``[ -~]``, a literal quote).
``StrictConverter`` closes all three: the ``char`` rule is llama.cpp's, literals escape backslashes,
every negated class excludes what a JSON string must escape, and a pattern's own classes and
literals are rewritten so that what they match is written the way JSON escapes it (a pattern class
that can match only such characters is refused). The caller (``grammar.py``) owns the limits.
"""

from __future__ import annotations

import json
import re
from typing import Any

from llama_cpp.llama_grammar import SchemaConverter

from ..errors import GrammarRejected
from .schemakeys import keep

SAFE_CHAR = r'[^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F])'
FORBIDDEN = [(0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C), (0x7F, 0x7F)]  # what a JSON string must escape
MAX_CODE_POINT = 0x10FFFF
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]|[^"\[]+', re.DOTALL)
_CLASS = re.compile(r'\[(?:[^\]\\]|\\.)*\]', re.DOTALL)
_SIMPLE_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]", "-": "-"}


def strict_schema_grammar(schema: dict[str, Any]) -> str:
    """The strict GBNF grammar for ``schema`` (raises whatever the converter raises on bad schemas)."""
    converter = StrictConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    resolved = converter.resolve_refs(schema, "stdin")
    converter.visit(resolved, "")
    return converter.format_grammar()


class StrictConverter(SchemaConverter):
    """llama-cpp-python's converter with the holes above closed (see the module docstring)."""

    def _format_literal(self, literal: str) -> str:
        return _emit_literal(literal)

    def visit(self, schema, name):
        """Keywords the stock converter drops (bounds, counts, formats) are kept or refused first."""
        kept = keep(self, schema, name)
        return kept if kept is not None else super().visit(schema, name)

    def _visit_pattern(self, pattern: str, name: str) -> str:
        before = set(self._rules)
        rule_name = super()._visit_pattern(spelled_pattern(pattern), name)
        for added in set(self._rules) - before:  # the pattern's own rules: its body, `dot`, repetitions
            self._rules[added] = _json_escaped_body(self._rules[added], outer=added == rule_name)
        return rule_name

    def format_grammar(self) -> str:
        if "char" in self._rules:
            self._rules["char"] = SAFE_CHAR
        for name, body in self._rules.items():  # negated classes sit only inside strings (keys, values)
            self._rules[name] = _CLASS.sub(lambda m: _strict_class(m.group(0), negated_only=True), body)
        return super().format_grammar()


def _json_escaped_body(body: str, outer: bool) -> str:
    """A pattern rule rewritten so every literal and class emits JSON-escaped text; ``outer`` keeps
    the rule's opening and closing ``"\\""`` (the JSON string's own quotes) as they are."""
    head, tail = '"\\"" ', ' "\\"" space'
    if outer and body.startswith(head) and body.endswith(tail):
        return head + _json_escaped_body(body[len(head):-len(tail)], outer=False) + tail
    out = []
    for token in _TOKEN.findall(body):
        if token.startswith('"'):
            text = _decode_literal(token[1:-1])
            out.append(_emit_literal(json.dumps(text, ensure_ascii=False)[1:-1]) if text is not None
                       else token)  # an escape GBNF does not know: llama.cpp's parser refuses it
        elif token.startswith("["):
            out.append(_strict_class(token, negated_only=False))
        else:
            out.append(token)
    return "".join(out)


_UNITS = {"d": "[0-9]", "D": "[^0-9]", "w": "[a-zA-Z0-9_]", "W": "[^a-zA-Z0-9_]", "s": "( |\\t|\\n|\\r)",
          "S": "[^ \\t\\n\\r]"}
_IN_CLASS = {"d": "0-9", "w": "a-zA-Z0-9_", "s": " \\t\\n\\r"}
_LITERAL_ESCAPES = '"\\'  # kept as escapes: the literal path writes them the way JSON escapes them
_HEX_WIDTH = {"x": 2, "u": 4, "U": 8}


def spelled_pattern(pattern: str) -> str:
    """``pattern`` with every escape spelled so the converter reads it as one unit of what Python's
    ``re`` means by it. The converter copies an escape into the literal run before it, so ``-\\d{4}``
    repeated ``-\\d`` and ``\\w+@`` became ``(@\\w)+``; and it copies ``\\d``, ``\\w``, ``\\s`` and escaped
    punctuation (``\\.``) as GBNF escapes GBNF does not have. Here ``\\d``, ``\\w``, ``\\s`` and their
    negations become classes (inside a class, their ranges), escaped punctuation becomes a one-character
    class, and any other escape a quantifier follows is put in a group. Escapes with no meaning here
    (``\\b``, ``\\p``) are left for llama.cpp's parser to refuse."""
    out, i, in_class, n = [], 0, False, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch != "\\" or i + 1 >= n:
            if ch == "[" and not in_class:
                in_class = True
            elif ch == "]" and in_class:
                in_class = False
            out.append(ch)
            i += 1
            continue
        kind = pattern[i + 1]
        end = i + 2 + _HEX_WIDTH.get(kind, 0)
        escape, i = pattern[i:end], end
        if in_class:
            out.append(_IN_CLASS.get(kind) or (f"\\x{ord(kind):02X}" if not kind.isalnum() else escape))
        elif kind in _UNITS:
            out.append(_UNITS[kind])
        elif not kind.isalnum() and kind not in _LITERAL_ESCAPES:
            out.append(f"[\\x{ord(kind):02X}]")
        else:
            out.append(f"({escape})" if i < n and pattern[i] in "*+?{" else escape)
    return "".join(out)


def _emit_literal(text: str) -> str:
    """``text`` as a GBNF literal that produces exactly ``text``."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    escaped = re.sub(r"[\x00-\x1F\x7F]", lambda m: f"\\x{ord(m.group(0)):02X}", escaped)
    return f'"{escaped}"'


def _decode_literal(body: str) -> str | None:
    """What a GBNF literal's body produces, or None for an escape GBNF does not know (left for
    llama.cpp's parser to refuse)."""
    out, i = [], 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        code, i = _escape_at(body, i)
        if code is None:
            return None
        out.append(chr(code))
    return "".join(out)


def _escape_at(text: str, i: int) -> tuple[int | None, int]:
    """The code point of the GBNF escape starting at ``text[i]`` (a backslash), and where it ends."""
    kind = text[i + 1] if i + 1 < len(text) else ""
    if kind in _SIMPLE_ESCAPES:
        return ord(_SIMPLE_ESCAPES[kind]), i + 2
    width = {"x": 2, "u": 4, "U": 8}.get(kind)
    digits = text[i + 2:i + 2 + width] if width else ""
    if width and len(digits) == width and all(c in "0123456789abcdefABCDEF" for c in digits):
        return int(digits, 16), i + 2 + width
    return None, i + 2


def _parse_class(inner: str) -> list[tuple[int, int]] | None:
    """The code-point ranges of a class's inside (after ``[`` or ``[^``), or None if unreadable."""
    points, i = [], 0  # (code point, whether it is an unescaped "-", which joins its neighbours)
    while i < len(inner):
        if inner[i] == "\\":
            code, i = _escape_at(inner, i)
            if code is None:
                return None
            points.append((code, False))
        else:
            points.append((ord(inner[i]), inner[i] == "-"))
            i += 1
    ranges, j = [], 0
    while j < len(points):
        if j + 2 < len(points) and points[j + 1][1]:
            ranges.append((points[j][0], points[j + 2][0]))
            j += 3
        else:
            ranges.append((points[j][0], points[j][0]))
            j += 1
    return ranges


def _subtract(ranges: list[tuple[int, int]], cut: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = []
    for lo, hi in ranges:
        pieces = [(lo, hi)]
        for clo, chi in cut:
            pieces = [p for a, b in pieces for p in ((a, min(b, clo - 1)), (max(a, chi + 1), b)) if p[0] <= p[1]]
        out.extend(pieces)
    return sorted(set(out))


def _point(code: int) -> str:
    return f"\\x{code:02X}" if code < 0x100 and not (0x30 <= code <= 0x39 or 0x41 <= code <= 0x5A or
                                                    0x61 <= code <= 0x7A) else (chr(code) if code < 0x100
                                                                               else f"\\U{code:08X}")


def _emit_class(ranges: list[tuple[int, int]], negated: bool) -> str:
    inner = "".join(_point(lo) if lo == hi else f"{_point(lo)}-{_point(hi)}" for lo, hi in ranges)
    return f"[{'^' if negated else ''}{inner}]"


def class_matches_nothing(token: str) -> bool:
    """Whether the class ``token`` (``[...]`` or ``[^...]``, as a pattern holds it) matches no character
    once ``_strict_class`` has made it strict: a dead end wherever a grammar requires it."""
    negated = token.startswith("[^")
    ranges = _parse_class(token[2 if negated else 1:-1])
    if ranges is None:
        return False  # an escape llama.cpp's parser refuses anyway
    if not negated:
        return not _subtract(ranges, FORBIDDEN)
    return not _subtract([(0, MAX_CODE_POINT)], ranges + FORBIDDEN)


def _strict_class(token: str, negated_only: bool) -> str:
    """A class that matches no character a JSON string must escape: a negated class gets them added to
    its exclusions; a positive one (only with ``negated_only`` off) has them taken out."""
    negated = token.startswith("[^")
    if negated_only and not negated:
        return token
    ranges = _parse_class(token[2 if negated else 1:-1])
    if ranges is None:
        return token  # an escape llama.cpp's parser will refuse anyway
    if negated:
        if not _subtract([(0, MAX_CODE_POINT)], ranges + FORBIDDEN):  # limits.py refuses it first, by place
            raise GrammarRejected(f"the pattern's class {token} matches no character a JSON string may hold",
                                  "empty_class")
        return _emit_class(sorted(set(ranges) | set(FORBIDDEN)), negated=True)
    kept = _subtract(ranges, FORBIDDEN)
    if not kept:
        raise GrammarRejected(f"the pattern's class {token} matches only characters a JSON string must "
                              "escape (quotes, backslashes, control characters)", "unsupported")
    return _emit_class(kept, negated=False)

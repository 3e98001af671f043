"""The limits a JSON schema must keep before it is turned into a llama.cpp grammar, checked by one walk.

A schema comes from a stranger's request (``response_format``, Ollama's ``format``, a forced tool's
``parameters``), and the grammar built from it runs in the runner that every client of the model
shares. llama.cpp's grammar parser refuses more than about 1,000 nested optional repetitions (and
llama-cpp-python then hands a null sampler on, which ends the runner by SIGSEGV); each alternative
alive at one position costs every token about a millisecond (measured: an ``enum`` of 1,000 values,
1.4 s a token on SmolLM2); and a repetition count is copied into the grammar text, so
``maxItems: 10**7`` would be a 210 MB string. So the walk runs first, on the schema as given, with a
budget on every dimension (see ``docs/security.md`` for the measurements behind each number), and a
schema over one is refused with a ``GrammarRejected`` that names the limit and where it was hit.
``$ref`` targets are walked where they are used, so a chain of definitions that fans out is counted
as the grammar llama.cpp would expand, not as the few lines it is written in.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from ..errors import GrammarRejected


@dataclass(frozen=True)
class GrammarLimits:
    schema_bytes: int = 128 * 1024   # the schema as JSON text
    nodes: int = 5_000               # objects, arrays and values visited, $ref targets counted where used
    depth: int = 32                  # nesting of objects and arrays in the schema
    alternatives: int = 256          # values of one enum, branches of one anyOf/oneOf, types of one node
    alternatives_total: int = 1_024  # the same, summed over the whole schema
    properties: int = 256            # properties of one object (optional ones convert in quadratic time)
    repeat: int = 500                # minItems/maxItems/minLength/maxLength/... and a pattern's {n,m}
    pattern_chars: int = 1_000       # the text of one pattern
    pattern_expansion: int = 4_000   # a pattern's characters with its quantifiers multiplied out
    number_digits: int = 20          # minimum/maximum and friends
    grammar_bytes: int = 256 * 1024  # the GBNF text produced
    grammar_rules: int = 4_096       # its rules


LIMITS = GrammarLimits()
REPEAT_KEYS = ("minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties",
               "minContains", "maxContains")
NUMBER_KEYS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
ALTERNATIVE_KEYS = ("enum", "anyOf", "oneOf", "type")


def refuse(limit: str, message: str) -> GrammarRejected:
    return GrammarRejected(f"the JSON schema is over the {limit} limit: {message}", limit)


class _Walk:
    def __init__(self, root: Any, limits: GrammarLimits):
        self.root, self.limits = root, limits
        self.nodes = 0
        self.alternatives = 0

    def visit(self, node: Any, where: str, depth: int, refs: tuple[str, ...]) -> None:
        self.nodes += 1
        if self.nodes > self.limits.nodes:
            raise refuse("nodes", f"more than {self.limits.nodes:,} parts (with $ref targets counted where "
                                  "they are used)")
        if depth > self.limits.depth:
            raise refuse("depth", f"nested more than {self.limits.depth} levels deep at {where}")
        if isinstance(node, list):
            for i, item in enumerate(node):
                self.visit(item, f"{where}/{i}", depth + 1, refs)
        elif isinstance(node, dict):
            self.keywords(node, where)
            for key, value in node.items():
                if isinstance(value, (dict, list)):
                    self.visit(value, f"{where}/{key}", depth + 1, refs)
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#") and ref not in refs:  # a recursive ref is a rule
                self.visit(self.resolve(ref), f"{where}/$ref", depth + 1, refs + (ref,))

    def keywords(self, node: dict, where: str) -> None:
        limits = self.limits
        for key in ALTERNATIVE_KEYS:
            value = node.get(key)
            if isinstance(value, list):
                if len(value) > limits.alternatives:
                    raise refuse("alternatives", f"{where}/{key} has {len(value):,} entries; at most "
                                                 f"{limits.alternatives} are allowed in one {key}")
                self.alternatives += len(value)
                if self.alternatives > limits.alternatives_total:
                    raise refuse("alternatives_total", f"more than {limits.alternatives_total:,} enum values "
                                                       "and anyOf/oneOf branches in all")
        props = node.get("properties")
        if isinstance(props, dict) and len(props) > limits.properties:
            raise refuse("properties", f"{where}/properties has {len(props):,} entries; at most "
                                       f"{limits.properties} are allowed in one object")
        for key in REPEAT_KEYS:
            _check_count(node.get(key), f"{where}/{key}", limits.repeat, "repeat")
        for key in NUMBER_KEYS:
            value = node.get(key)
            if isinstance(value, (int, float)) and not _small_number(value, limits.number_digits):
                raise refuse("number_digits", f"{where}/{key} is not a finite number of at most "
                                              f"{limits.number_digits} digits")
        pattern = node.get("pattern")
        if isinstance(pattern, str):
            check_pattern(pattern, f"{where}/pattern", limits)

    def resolve(self, ref: str) -> Any:
        node: Any = self.root
        for part in ref.lstrip("#").split("/"):
            if not part:
                continue
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None  # the converter reports a dangling ref itself
        return node


def _check_count(value: Any, where: str, cap: int, limit: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    if not math.isfinite(value) or value > cap:
        raise refuse(limit, f"{where} is {value}; repetition counts are capped at {cap}")


def _small_number(value: float, digits: int) -> bool:
    return math.isfinite(value) and abs(value) < 10 ** digits


def check_pattern(pattern: str, where: str, limits: GrammarLimits) -> None:
    """Refuse a pattern that is long, that the converter would misread or loop on, whose quantifiers
    multiply out past the expansion limit, or that holds a class that matches nothing in a JSON string."""
    if len(pattern) > limits.pattern_chars:
        raise refuse("pattern_chars", f"{where} is {len(pattern):,} characters; at most "
                                      f"{limits.pattern_chars:,} are allowed")
    reader = PatternReader(pattern, where, limits)
    reader.read()
    if reader.classes:
        from .strictjson import class_matches_nothing  # the converter's own reading of a class

        for token in reader.classes:
            if class_matches_nothing(token):
                raise GrammarRejected(f"the JSON schema cannot be enforced: {where} has the class {token}, which "
                                      "matches no character a JSON string may hold (quotes, backslashes and "
                                      "control characters are taken out of every class)", "empty_class")


_COUNT = re.compile(r"([0-9]+)|([0-9]*),([0-9]*)")  # ASCII digits only: re's \d also takes "٦"
_NON_LITERAL = frozenset("()*+.?[]{}|")  # llama-cpp-python's NON_LITERAL_SET


def read_quantifier(body: str) -> tuple[int, int | None] | None:
    """The (min, max) of a pattern quantifier's inside (``3``, ``3,``, ``3,5``, ``,5``; max None: no
    bound), or None for any other spelling. The converter reads its inside with ``int()`` after
    ``strip()``, which also takes `` 600``, ``6_00``, ``+600``, ``-1`` and other scripts' digits; every
    spelling this does not read is refused, so the cap and the converter never read one differently."""
    m = _COUNT.fullmatch(body)
    if m is None:
        return None
    if m.group(1) is not None:
        return int(m.group(1)), int(m.group(1))
    return int(m.group(2) or 0), int(m.group(3)) if m.group(3) else None


@dataclass
class _Unit:
    """One unit of a pattern as ``PatternReader`` reads it."""

    size: int  # its characters with its quantifiers multiplied out
    nullable: bool = False  # it can match no text
    varies: bool = False  # it is under a quantifier that repeats it a varying number of times (+, {2,5})
    single_repeat: bool = False  # a group holding one such unit and nothing else: (a+)
    branch: bool = False  # a "|" between alternatives


def _all_nullable(seq: list[_Unit]) -> bool:
    """Whether the units since the last ``|`` of ``seq`` can all match no text (none at all can)."""
    tail = seq[max((i for i, u in enumerate(seq) if u.branch), default=-1) + 1:]
    return all(u.nullable for u in tail)


class PatternReader:
    """A pattern read the way llama-cpp-python's converter reads it (``SchemaConverter._visit_pattern``:
    the same units, the same class and quantifier boundaries, the same escapes), so the caps see every
    quantifier the converter will expand. Collects the classes (``classes``) and refuses, naming
    ``where``: a quantifier it cannot read, one over ``repeat``, a total over ``pattern_expansion``,
    and the spellings the converter would fail on or loop on forever (a lone ``]`` or ``}``)."""

    def __init__(self, pattern: str, where: str, limits: GrammarLimits):
        from .strictjson import spelled_pattern  # what the converter is handed: escapes spelled as units

        pattern = spelled_pattern(pattern)
        anchored = len(pattern) >= 2 and pattern.startswith("^") and pattern.endswith("$")
        self.text = pattern[1:-1] if anchored else pattern  # unanchored: the converter refuses it
        self.where, self.limits = where, limits
        self.i = 0
        self.classes: list[str] = []
        self.quantifiers: list[tuple[int, int | None]] = []  # each {...}, in order, as (min, max)

    def read(self) -> int:
        """The pattern's size with its quantifiers multiplied out (refused past the limit)."""
        return self._unit_sequence().size

    def _bad(self, what: str) -> GrammarRejected:
        return GrammarRejected(f"the JSON schema cannot be enforced: {self.where} {what} (at character "
                               f"{self.i + 1} of the pattern's body)", "pattern_syntax")

    def _unit_sequence(self) -> _Unit:
        text, start = self.text, self.i
        seq: list[_Unit] = []  # each unit's expanded size (a quantifier multiplies the last) and shape
        empty_branch = False  # an alternative of this sequence matches nothing: it all can
        while self.i < len(text):
            c = text[self.i]
            if c == "(":
                self.i += 1
                if self.i < len(text) and text[self.i] == "?":
                    raise self._bad("uses a (?...) group, which the converter does not support")
                seq.append(self._unit_sequence())
            elif c == ")":
                self.i += 1
                if start == 0 or text[start - 1] != "(":
                    raise self._bad("closes a group it never opened")
                return self._group(seq, empty_branch)
            elif c == "[":
                seq.append(_Unit(self._class()))
            elif c == "|":
                empty_branch = empty_branch or _all_nullable(seq)
                seq.append(_Unit(0, branch=True))
                self.i += 1
            elif c in "*+?{":
                if not seq:
                    raise self._bad(f"has a quantifier {c!r} with nothing before it")
                seq[-1] = self._quantified(seq[-1], c)
            else:
                seq.append(_Unit(1 if c == "." else self._literal()))
                self.i += c == "."
        return self._group(seq, empty_branch)

    def _group(self, seq: list[_Unit], empty_branch: bool) -> _Unit:
        """A sequence read whole, as one unit: its size, whether it can match nothing, and whether it is a
        single repeated unit (``(a+)``)."""
        nullable = empty_branch or _all_nullable(seq)
        return _Unit(self._within(sum(u.size for u in seq)), nullable, single_repeat=len(seq) == 1 and seq[0].varies)

    def _quantified(self, unit: _Unit, c: str) -> _Unit:
        """``unit`` under the quantifier at ``self.i``. One that repeats something able to match nothing
        (``([ab]*){,500}``, ``(a?)+``) or a lone repetition (``(a+)+``) is refused: llama.cpp's grammar then
        keeps a parse for every way to split the text among the copies (``([0-9]{3})+`` splits one way only), and checking each candidate
        token against hundreds of them took minutes a token, inside the step every stream of the model
        shares (fuzz/fuzz_grammar.py: one request 393 s, another client's stream stalled 53 s)."""
        if c == "{":  # each product is checked, so the sizes stay small numbers
            size = self._within(unit.size * self._quantifier())
            low, high = self.quantifiers[-1]
        else:
            self.i += 1
            size, (low, high) = unit.size, {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
        repeats = high is None or high > 1
        if repeats and (unit.nullable or unit.single_repeat):
            what = "something that can match no text" if unit.nullable else "a repetition"
            raise GrammarRejected(f"the JSON schema cannot be enforced: {self.where} repeats {what} (before "
                                  f"character {self.i + 1} of the pattern's body), which makes llama.cpp's grammar "
                                  "try every way to split a reply; write the repetition once (a* for (a*)*)",
                                  "nested_repetition")
        return _Unit(size, unit.nullable or low == 0, varies=repeats and high != low)

    def _within(self, size: int) -> int:
        if size > self.limits.pattern_expansion:
            raise refuse("pattern_expansion", f"{self.where} multiplies out to more than "
                                              f"{self.limits.pattern_expansion:,} characters")
        return size

    def _class(self) -> int:
        text, i = self.text, self.i + 1
        while i < len(text) and text[i] != "]":
            i += 2 if text[i] == "\\" else 1
        if i >= len(text):
            raise self._bad("opens a class [ it never closes")
        self.classes.append(text[self.i:i + 1])
        self.i = i + 1
        return 1

    def _quantifier(self) -> int:
        """Read ``{...}`` at ``self.i``; the count it multiplies its unit by (its max, or min + 1)."""
        end = self.text.find("}", self.i)
        if end < 0:
            raise self._bad("opens a quantifier { it never closes")
        body = self.text[self.i + 1:end]
        counts = read_quantifier(body)
        if counts is None:
            raise self._bad(f"has the quantifier {{{body}}}; only {{n}}, {{n,}}, {{,m}} and {{n,m}} with the digits "
                            "0-9 and no spaces are allowed")
        low, high = counts
        if high is not None and high < low:
            raise self._bad(f"has the quantifier {{{body}}}, whose maximum is below its minimum")
        count = max(low, high if high is not None else low + 1)
        _check_count(count, self.where, self.limits.repeat, "repeat")
        self.quantifiers.append(counts)
        self.i = end + 1
        return count

    def _literal(self) -> int:
        """Consume one literal run exactly as the converter does; its length in characters."""
        text, n, taken = self.text, len(self.text), 0
        while self.i < n:
            c = text[self.i]
            if c == "\\" and self.i < n - 1:
                self.i += 2
            elif c == '"' or (c not in _NON_LITERAL and (self.i == n - 1 or not taken or text[self.i + 1] == "."
                                                           or text[self.i + 1] not in _NON_LITERAL)):
                self.i += 1
            else:
                break
            taken += 1
        if not taken:  # a lone "]" or "}": the converter would take nothing here, and loop forever
            raise self._bad(f"has a {text[self.i]!r} that closes nothing (write it as \\{text[self.i]})")
        return taken


def check_schema(schema: Any, limits: GrammarLimits = LIMITS) -> None:
    """Refuse ``schema`` if it is over any limit. Cheap: stops at the node budget, builds nothing."""
    if not isinstance(schema, (dict, bool)):
        raise GrammarRejected("the JSON schema must be an object", "schema")
    walk = _Walk(schema, limits)
    try:
        walk.visit(schema, "#", 0, ())
    except RecursionError:
        raise refuse("depth", f"nested more than {limits.depth} levels deep") from None
    size = len(json.dumps(schema, ensure_ascii=False))
    if size > limits.schema_bytes:
        raise refuse("schema_bytes", f"the schema is {size:,} bytes of JSON; at most {limits.schema_bytes:,} "
                                     "are allowed")


def check_grammar_size(grammar: str, limits: GrammarLimits = LIMITS) -> None:
    """Refuse a grammar (built here or given raw) whose text or rule count is past the limits."""
    if len(grammar) > limits.grammar_bytes:
        raise GrammarRejected(f"the grammar is over the grammar_bytes limit: {len(grammar):,} bytes, at most "
                              f"{limits.grammar_bytes:,}", "grammar_bytes")
    rules = grammar.count("::=")
    if rules > limits.grammar_rules:
        raise GrammarRejected(f"the grammar is over the grammar_rules limit: {rules:,} rules, at most "
                              f"{limits.grammar_rules:,}", "grammar_rules")

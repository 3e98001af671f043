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
_QUANTIFIER = re.compile(r"\{(\d*)(?:,(\d*))?\}")


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
    """Refuse a pattern that is long, or whose quantifiers multiply out past the expansion limit."""
    if len(pattern) > limits.pattern_chars:
        raise refuse("pattern_chars", f"{where} is {len(pattern):,} characters; at most "
                                      f"{limits.pattern_chars:,} are allowed")
    groups = [0]   # expanded size of each open group
    last = 0       # expanded size of the last atom, which a quantifier multiplies
    i = 0
    while i < len(pattern):
        if max(groups) > limits.pattern_expansion:
            raise refuse("pattern_expansion", f"{where} multiplies out to more than "
                                              f"{limits.pattern_expansion:,} characters")
        c = pattern[i]
        if c == "\\":
            last, i = 1, i + 2
            groups[-1] += 1
            continue
        if c == "(":
            groups.append(0)
            last = 0
        elif c == ")" and len(groups) > 1:
            last = groups.pop()
            groups[-1] += last
        elif c == "[":
            end = pattern.find("]", i + 1)
            i = len(pattern) if end < 0 else end
            last = 1
            groups[-1] += 1
        elif c == "{" and (m := _QUANTIFIER.match(pattern, i)):
            low, high = m.group(1) or "0", m.group(2)
            count = max(int(low), int(high) if high else int(low) + 1)
            _check_count(count, where, limits.repeat, "repeat")
            groups[-1] += last * (count - 1)
            last *= count
            i = m.end()
            continue
        elif c not in "|*+?^$":
            last = 1
            groups[-1] += 1
        i += 1
    if sum(groups) > limits.pattern_expansion:
        raise refuse("pattern_expansion", f"{where} multiplies out to more than "
                                          f"{limits.pattern_expansion:,} characters")


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

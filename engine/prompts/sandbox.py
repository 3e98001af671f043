"""A Jinja sandbox that bounds what a chat template may build, before it builds it.

Jinja's ``ImmutableSandboxedEnvironment`` keeps a template away from Python internals but not from
memory and time: ``{{ 'A' * 10**9 }}`` allocates gigabytes before any check on the rendered prompt
could run. ``BoundedEnvironment`` adds a per-render ``Budget``: every operation that can grow a
value (``*``, ``+``, ``%``, ``**``, ``~``, ``join``, ``center``, ``indent``, ``format``, ``replace``,
``sum``, the string methods that pad or replace) has its result size worked out from its operands
and is refused if it would pass ``MAX_VALUE_CHARS``; the sizes it does build are summed against
``MAX_BUILT_CHARS``; every loop iteration, call and lookup ticks a step counter and the wall clock
(``MAX_STEPS``, ``MAX_SECONDS``). A refusal is the engine's ``TemplateError`` naming the budget.
``lipsum`` (unbounded text) is not offered; ``range`` keeps Jinja's own 100,000-item cap.

Threading: the budget lives in a context variable set by ``rendering``, so templates may render on
several threads at once.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
import time
from collections.abc import Iterator
from typing import Any

from jinja2 import nodes, pass_context
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.visitor import NodeTransformer

from ..errors import TemplateError

MAX_VALUE_CHARS = 8 * 1024 * 1024    # one string, or one list's items; also the rendered prompt
MAX_BUILT_CHARS = 16 * MAX_VALUE_CHARS  # everything the checked operations build in one render
MAX_STEPS = 2_000_000                # loop iterations, calls and lookups in one render
MAX_SECONDS = 5.0                    # wall time of one render
MAX_INT_BITS = 4_096                 # integers a template computes (2 ** 10 ** 9 is a CPU bomb)
MAX_ITEMS = 100_000                  # batch/slice counts (Jinja caps range() at the same)
STEPS_PER_ITEM = 100                 # more steps for each message and tool a render is given
ITEM_CHARS = 8                       # what one item of a list a filter builds counts as (a pointer's bytes)
MAX_STRFTIME_CHARS = 256             # strftime_now's format ('%c' grows 12-fold, in one C call)
_PERCENT_SPEC = re.compile(r"%[-+ #0]*(\d*)(?:\.(\d+))?")   # '%10.3f': width and precision
_FORMAT_SPEC = re.compile(r"\{[^{}]*?:([^{}]*)\}")          # '{:>10.3}': the spec after the colon
_NUMBER = re.compile(r"\d+")
_NESTED_FIELD = re.compile(r"\{[^{}]*\{")


class Budget:
    """What one render may still spend."""

    def __init__(self, items: int = 0) -> None:
        self.deadline = time.monotonic() + MAX_SECONDS
        self.steps = 0
        self.built = 0
        self.max_steps = MAX_STEPS + STEPS_PER_ITEM * items

    def step(self, n: int = 1) -> None:
        self.steps += n
        if self.steps > self.max_steps:
            raise over("steps", f"{self.max_steps:,} loop iterations, calls and lookups")
        if self.steps & 0xFF == 0 and time.monotonic() > self.deadline:
            raise over("time", f"{MAX_SECONDS:g} seconds")

    def build(self, size: int) -> None:
        if size > MAX_VALUE_CHARS:
            raise over("value size", f"{MAX_VALUE_CHARS:,} characters in one value (this one would be {size:,})")
        self.built += size
        if self.built > MAX_BUILT_CHARS:
            raise over("build", f"{MAX_BUILT_CHARS:,} characters built in one render")


_BUDGET: contextvars.ContextVar[Budget | None] = contextvars.ContextVar("fireside_template_budget", default=None)


def over(name: str, what: str) -> TemplateError:
    return TemplateError(f"the model's chat template was stopped: it went over its {name} budget ({what})")


def budget() -> Budget:
    current = _BUDGET.get()
    if current is None:  # outside ``rendering`` (constant folding at compile time): a fresh budget
        current = Budget()
    return current


@contextlib.contextmanager
def rendering(items: int = 0) -> Iterator[Budget]:
    """Give the renders on this thread (context) a fresh budget for the duration; ``items`` (messages
    and tools) raise its step budget, so a long conversation is not taken for a looping template."""
    token = _BUDGET.set(Budget(items))
    try:
        yield _BUDGET.get()  # type: ignore[misc]
    finally:
        _BUDGET.reset(token)


def _size(value: Any) -> int:
    return len(value) if isinstance(value, (str, bytes, list, tuple)) else len(str(value)) if value is not None else 0


def _grown(operator: str, left: Any, right: Any) -> int | None:
    """The size of ``left <operator> right`` if it builds a sequence, worked out without building it."""
    if operator == "*":
        seq, n = (left, right) if isinstance(right, int) else (right, left)
        if isinstance(seq, (str, list, tuple)) and isinstance(n, int):
            return len(seq) * max(n, 0)
    elif operator == "+" and isinstance(left, (str, list, tuple)) and isinstance(right, (str, list, tuple)):
        return len(left) + len(right)
    elif operator == "%" and isinstance(left, str):
        args = right if isinstance(right, tuple) else (right,)
        widths = [int(w) for spec in _PERCENT_SPEC.findall(left) for w in spec if w] or [0]
        if "*" in left:  # widths taken from the arguments
            widths += [a for a in args if isinstance(a, int)]
        return len(left) + max(widths) * max(1, left.count("%")) + sum(_size(a) for a in args)
    return None


def _check_int(operator: str, left: Any, right: Any) -> None:
    if not (isinstance(left, int) and isinstance(right, int)):
        return
    if operator == "**" and right > 0:
        bits = max(left.bit_length(), 1) * right
    elif operator == "*":
        bits = left.bit_length() + right.bit_length()
    else:
        return
    if bits > MAX_INT_BITS:
        raise over("integer", f"numbers of {MAX_INT_BITS:,} bits")


# --- filters and methods that grow strings: sizes worked out before the call ---------------------------
def _width_of(args: tuple, kwargs: dict, name: str = "width", index: int = 0) -> int:
    value = kwargs.get(name, args[index] if len(args) > index else 0)
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _joined_size(items: Any, sep: Any) -> tuple[list, int]:
    items = list(items)
    budget().step(len(items))
    return items, sum(_size(i) for i in items) + _size(sep) * max(len(items) - 1, 0)


def _replaced_size(s: Any, old: Any, new: Any) -> int:
    if not (isinstance(s, str) and isinstance(old, str) and isinstance(new, str)):
        return _size(s)
    hits = s.count(old) if old else len(s) + 1
    return len(s) + hits * max(len(new) - len(old), 0)


def _estimate_method(obj: Any, args: tuple, kwargs: dict) -> int | None:
    obj = getattr(obj, "__wrapped__", obj)  # the sandbox wraps str.format in a function of its own
    owner, name = getattr(obj, "__self__", None), getattr(obj, "__name__", "")
    if not isinstance(owner, str):
        return None
    if name in ("center", "ljust", "rjust", "zfill"):
        return max(len(owner), _width_of(args, kwargs))
    if name == "expandtabs":
        return len(owner) * max(_width_of(args, kwargs, "tabsize"), 8)
    if name == "replace" and len(args) >= 2:
        return _replaced_size(owner, args[0], args[1])
    if name == "join" and args:
        return None  # checked by the caller, which must see the items once
    if name in ("format", "format_map"):
        widths = [int(w) for spec in _FORMAT_SPEC.findall(owner) for w in _NUMBER.findall(spec)] or [0]
        if _NESTED_FIELD.search(owner):  # '{:{}}': a width taken from the arguments
            widths += [a for a in (*args, *kwargs.values()) if isinstance(a, int)]
        return len(owner) + max(widths) * max(owner.count("{"), 1) + sum(_size(a) for a in args)
    return None


class _Bounded(NodeTransformer):
    """Rewrites a parsed template so loops tick the budget and ``~`` concatenation is size-checked."""

    def visit_For(self, node: nodes.For) -> nodes.Node:
        node = self.generic_visit(node)
        node.iter = nodes.Filter(node.iter, "fireside_steps", [], [], None, None, lineno=node.lineno)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        node = self.generic_visit(node)
        return nodes.Filter(nodes.List(node.nodes, lineno=node.lineno), "fireside_concat", [], [], None, None,
                            lineno=node.lineno)


@pass_context
def _steps(context: Any, iterable: Any) -> Iterator[Any]:
    spend = budget()
    for item in iterable:
        spend.step()
        yield item


@pass_context
def _concat(context: Any, parts: list) -> str:
    texts = [str(p) for p in parts]
    budget().build(sum(len(t) for t in texts))
    return "".join(texts)


class BoundedEnvironment(ImmutableSandboxedEnvironment):
    """The sandbox, with every growing operation sized before it runs (see the module docstring)."""

    intercepted_binops = frozenset({"*", "+", "%", "**"})

    def __init__(self, **options: Any):
        super().__init__(**options)
        self.globals.pop("lipsum", None)
        self.filters.update(fireside_steps=_steps, fireside_concat=_concat)

    def guard_filters(self) -> None:
        """Wrap every filter registered so far (call after adding the environment's own)."""
        for name, fn in list(self.filters.items()):
            if not name.startswith("fireside_"):
                self.filters[name] = _guarded_filter(name, fn)

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        return _Bounded().visit(super()._parse(source, name, filename))

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        spend = budget()
        spend.step()
        _check_int(operator, left, right)
        size = _grown(operator, left, right)
        if size is not None:
            spend.build(size)
        return super().call_binop(context, operator, left, right)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        spend = budget()
        spend.step()
        if getattr(__obj, "__name__", "") == "join" and isinstance(getattr(__obj, "__self__", None), str) and args:
            items, size = _joined_size(args[0], __obj.__self__)
            spend.build(size)
            args = (items, *args[1:])
        else:
            size = _estimate_method(__obj, args, kwargs)
            if size is not None:
                spend.build(size)
        return super().call(__context, __obj, *args, **kwargs)

    def getitem(self, obj: Any, argument: Any) -> Any:
        budget().step()
        return super().getitem(obj, argument)

    def getattr(self, obj: Any, attribute: str) -> Any:
        budget().step()
        return super().getattr(obj, attribute)


def _estimate_filter(name: str, value: Any, args: tuple, kwargs: dict) -> tuple[Any, int]:
    """The value to pass on (an iterable read once, as a list) and the size the filter will build."""
    if name == "center":
        return value, max(_size(value), _width_of(args, kwargs))
    if name == "indent":
        width = kwargs.get("width", args[0] if args else 4)
        pad = len(width) if isinstance(width, str) else _width_of((width,), {})
        return value, _size(value) + pad * (str(value).count("\n") + 1)
    if name == "wordwrap":
        return value, _size(value) * 2
    if name == "format":
        return value, _grown("%", str(value), tuple(args)) or 0
    if name == "replace" and len(args) >= 2:
        return value, _replaced_size(value, args[0], args[1])
    if name in _LISTING:
        return _listed(name, value, args, kwargs)
    if name == "sum" and not isinstance(value, (str, dict)):
        return _summed(value, kwargs.get("start", args[1] if len(args) > 1 else 0))
    if name == "tojson":
        indent = kwargs.get("indent", args[0] if args else None)
        if _size(indent) > 16 or (isinstance(indent, int) and indent > 16):
            raise over("value size", "an indent of at most 16")
        return value, 0
    if name == "join" and not isinstance(value, (str, dict)):
        items = list(value)
        return items, _joined_size(items, kwargs.get("d", args[0] if args else ""))[1]
    return value, 0


_LISTING = frozenset({"batch", "slice", "list", "sort", "reverse", "unique", "dictsort", "groupby"})


def _listed(name: str, value: Any, args: tuple, kwargs: dict) -> tuple[Any, int]:
    """A filter that makes a list of ``value``'s items (a string's characters): one pointer per item."""
    if name in ("batch", "slice"):
        count = _width_of(args, kwargs, "linecount" if name == "batch" else "slices")
        if count > MAX_ITEMS:
            raise over("items", f"{name} into {MAX_ITEMS:,} at most")
    if not isinstance(value, (str, list, tuple, dict)):
        value = list(value)
    budget().step(len(value))
    return value, len(value) * ITEM_CHARS


def _summed(value: Any, start: Any) -> tuple[list, int]:
    """``sum`` of sequences copies the growing total once per item (quadratic, in one C call): each
    copy is charged to the build budget before any runs."""
    items = list(value)
    spend = budget()
    spend.step(len(items))
    if isinstance(start, (str, list, tuple)):
        weight = 1 if isinstance(start, str) else ITEM_CHARS
        total = _size(start) * weight
        for item in items:
            total += _size(item) * weight
            spend.build(total)
    return items, 0


def _guarded_filter(name: str, original: Any) -> Any:
    """``original``, charged a step and, for filters that grow values, sized before it runs.

    Every filter becomes context-taking, which also keeps Jinja from running it at compile time on
    constant arguments (constant folding would run it outside any budget).
    """
    from jinja2.utils import _PassArg

    kind = _PassArg.from_obj(original)

    @pass_context
    def guarded(context: Any, value: Any, *args: Any, **kwargs: Any) -> Any:
        spend = budget()
        spend.step()
        value, size = _estimate_filter(name, value, args, kwargs)
        if size:
            spend.build(size)
        if kind is _PassArg.context:
            return original(context, value, *args, **kwargs)
        if kind is _PassArg.eval_context:
            return original(context.eval_ctx, value, *args, **kwargs)
        if kind is _PassArg.environment:
            return original(context.environment, value, *args, **kwargs)
        return original(value, *args, **kwargs)

    guarded.__name__ = getattr(original, "__name__", name)
    return guarded

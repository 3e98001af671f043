"""Compile a grammar once with llama.cpp's own parser, in a short-lived process, before a runner sees it.

llama.cpp's grammar parser runs inside the runner that every client of a model shares, and a grammar
it refuses makes llama-cpp-python add a null sampler, which ends that runner by SIGSEGV. The limits
in ``limits.py`` keep known bombs out; this check catches whatever they miss: the grammar is parsed
by ``llama_sampler_init_grammar`` in a child process of its own (no model: the parser needs no
vocabulary), under a memory limit and a timeout, so a refusal, a crash or a blow-up costs that child
only and comes back as a ``GrammarRejected`` naming what llama.cpp said. The child then walks the
grammar (``dead_end``): a rule, group or class reachable from ``root`` that no finite text completes (a
class that matches no character, a rule that only recurses) is a point where every token would be
masked, so the grammar is refused before it reaches a runner; the walk is linear in the grammar's size.
Verdicts are cached by the
grammar's hash, so each distinct grammar pays the cost (a Python start-up and a ``dlopen``: about
0.3 s on a loaded two-core machine) once.

``verify`` runs on the caller's thread (a server worker or the chat window's generation thread).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
from collections import OrderedDict

from ..errors import GrammarRejected, RuntimeFailure

CHECK_TIMEOUT_S = 20.0
CHECK_MEMORY_BYTES = 2 * 1024**3  # data segment of the checking child (RLIMIT_DATA), where supported
_CACHE_SIZE = 512
_cache: OrderedDict[str, str | None] = OrderedDict()  # grammar hash -> None (compiles) or why not
_lock = threading.Lock()
_running = threading.BoundedSemaphore(4)  # checks at once: a burst of new schemas is not a fork bomb
_TIMED_OUT = "timed out"


def checker_command() -> list[str]:
    if getattr(sys, "frozen", False):
        return [sys.executable, "--fireside-check-grammar"]  # see installers/entry.py
    return [sys.executable, "-m", "fireside.engine.structured.grammarcheck"]


def _limit_memory() -> None:  # runs in the child between fork and exec
    import resource

    resource.setrlimit(resource.RLIMIT_DATA, (CHECK_MEMORY_BYTES, CHECK_MEMORY_BYTES))


def _compile_elsewhere(grammar: str) -> str | None:
    """None if llama.cpp compiles ``grammar`` in a child process, else why it did not."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": ""}  # the parser needs no GPU
    try:
        with _running:
            done = subprocess.run(checker_command(), input=grammar.encode("utf-8"), capture_output=True,
                                  timeout=CHECK_TIMEOUT_S, env=env,
                                  preexec_fn=_limit_memory if sys.platform.startswith("linux") else None)
    except subprocess.TimeoutExpired:
        return _TIMED_OUT
    except OSError as exc:
        raise RuntimeFailure(f"could not start the grammar check: {exc}") from exc
    if done.returncode == 0 and done.stdout.strip() == b"ok":
        return None
    said = [line for line in done.stderr.decode("utf-8", "replace").splitlines()
            if "error" in line.lower() or "unsupported" in line.lower() or "exceeds" in line.lower()]
    if done.returncode < 0:
        return f"llama.cpp's grammar parser crashed on it (signal {-done.returncode})"
    return said[0].strip()[:300] if said else "llama.cpp's grammar parser refused it"


def verify(grammar: str) -> None:
    """Raise ``GrammarRejected`` unless llama.cpp compiles ``grammar``; checks each grammar once."""
    key = hashlib.sha256(grammar.encode("utf-8")).hexdigest()
    with _lock:
        known = key in _cache
        why = _cache.get(key)
        if known:
            _cache.move_to_end(key)
    if not known:
        why = _compile_elsewhere(grammar)
        if why == _TIMED_OUT:  # maybe only a busy machine: not remembered
            why = f"llama.cpp took longer than {CHECK_TIMEOUT_S:.0f} s to compile it"
        else:
            with _lock:
                _cache[key] = why
                while len(_cache) > _CACHE_SIZE:
                    _cache.popitem(last=False)
    if why is not None:
        raise GrammarRejected(f"the grammar cannot be used: {why}", "llama.cpp")


def _libllama():
    """llama.cpp's library from llama_cpp's folder, loaded directly: importing the llama_cpp package
    (its backends, its Python bindings) costs about a second; the parser needs only this."""
    import ctypes
    import importlib.util

    spec = importlib.util.find_spec("llama_cpp")
    folder = os.path.join(os.path.dirname(spec.origin), "lib") if spec and spec.origin else ""
    for name in ("libllama.so", "libllama.dylib", "llama.dll"):
        path = os.path.join(folder, name)
        if os.path.exists(path):
            lib = ctypes.CDLL(path)
            break
    else:
        import llama_cpp

        lib = llama_cpp.llama_cpp._lib
    lib.llama_sampler_init_grammar.restype = ctypes.c_void_p
    lib.llama_sampler_init_grammar.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
    lib.llama_sampler_free.argtypes = [ctypes.c_void_p]
    return lib


# --- the walk: can every point the grammar reaches still be completed? -----------------------------------
MAX_CODE_POINT = 0x10FFFF
_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")  # llama.cpp's is_word_char
_ESCAPES = {"n": 10, "r": 13, "t": 9, "\\": 92, '"': 34, "[": 91, "]": 93}


class _Gbnf:
    """A GBNF text read as llama.cpp's parser reads it (``llama-grammar.cpp``), for a grammar it has
    already accepted. ``alts[k]`` are nonterminal k's alternatives (rules by name, then each group);
    an element is ``(kind, payload, min_repeats, text)``: kind "ref" (payload: a nonterminal), "class"
    (payload: whether it matches some character) or "char" (a literal, ``.`` or a token)."""

    def __init__(self, text: str):
        self.s, self.i = text, 0
        self.ids: dict[str, int] = {}
        self.names: list[str] = []
        self.alts: list[list[list[tuple]]] = []

    def nt(self, name: str) -> int:
        if name not in self.ids:
            self.ids[name] = len(self.names)
            self.names.append(name)
            self.alts.append([])
        return self.ids[name]

    def read(self) -> None:
        self.space(True)
        while self.i < len(self.s):
            start = self.i
            while self.i < len(self.s) and self.s[self.i] in _WORD:
                self.i += 1
            name = self.s[start:self.i]
            self.space(False)
            self.i += 3  # "::="
            self.space(True)
            self.alts[self.nt(name)].extend(self.alternates(False))
            self.space(True)

    def space(self, newlines: bool) -> None:
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c == "#":
                while self.i < len(s) and s[self.i] not in "\r\n":
                    self.i += 1
            elif c in " \t" or (newlines and c in "\r\n"):
                self.i += 1
            else:
                return

    def alternates(self, nested: bool) -> list[list[tuple]]:
        alts = [self.sequence(nested)]
        while self.i < len(self.s) and self.s[self.i] == "|":
            self.i += 1
            self.space(True)
            alts.append(self.sequence(nested))
        return alts

    def sequence(self, nested: bool) -> list[tuple]:
        seq: list[tuple] = []
        s = self.s
        while self.i < len(s):
            c, start = s[self.i], self.i
            if c == '"':
                self.i += 1
                while s[self.i] != '"':
                    self.char()
                self.i += 1
                seq.append(("char", True, 1, s[start:self.i]))
            elif c == "[":
                matches = self.char_class()
                seq.append(("class", matches, 1, s[start:self.i]))
            elif c in _WORD:
                while self.i < len(s) and s[self.i] in _WORD:
                    self.i += 1
                seq.append(("ref", self.nt(s[start:self.i]), 1, s[start:self.i]))
            elif c == "(":
                self.i += 1
                self.space(True)
                group = self.nt(f"({len(self.names)})")
                self.alts[group] = self.alternates(True)
                self.i += 1  # ")"
                seq.append(("ref", group, 1, s[start:self.i]))
            elif c in ".<!":
                self.i = s.index(">", self.i) + 1 if c != "." else self.i + 1
                seq.append(("char", True, 1, s[start:self.i]))
            elif c in "*+?{" and seq:
                seq[-1] = (*seq[-1][:2], self.repeats(seq[-1][2]), seq[-1][3])
            else:
                break
            self.space(nested)
        return seq

    def repeats(self, current: int) -> int:
        """The least count of the postfix operator at ``i`` (``*``, ``?``: 0; ``+``: 1; ``{m...}``: m)."""
        c = self.s[self.i]
        if c != "{":
            self.i += 1
            return 0 if c in "*?" else current
        end = self.s.index("}", self.i)
        low = self.s[self.i + 1:end].split(",")[0].strip()
        self.i = end + 1
        return int(low) if low else 0

    def char(self) -> int:
        s = self.s
        if s[self.i] != "\\":
            self.i += 1
            return ord(s[self.i - 1])
        kind = s[self.i + 1]
        width = {"x": 2, "u": 4, "U": 8}.get(kind)
        if width:
            self.i += 2 + width
            return int(s[self.i - width:self.i], 16)
        self.i += 2
        return _ESCAPES.get(kind, ord(kind))

    def char_class(self) -> bool:
        """Read ``[...]`` at ``i``; whether it matches any code point at all."""
        self.i += 1
        negated = self.s[self.i] == "^"
        self.i += negated
        ranges = []
        while self.s[self.i] != "]":
            low = high = self.char()
            if self.s[self.i] == "-" and self.s[self.i + 1] != "]":
                self.i += 1
                high = self.char()
            ranges.append((low, high))
        self.i += 1
        if not negated:
            return any(low <= min(high, MAX_CODE_POINT) for low, high in ranges)
        covered = -1  # every code point up to here is excluded
        for low, high in sorted(ranges):
            if low > covered + 1:
                return True
            covered = max(covered, high)
        return covered < MAX_CODE_POINT


def dead_end(grammar: str) -> str | None:
    """Where a grammar llama.cpp accepted can get stuck, in words, or None: every rule, group and class
    reachable from ``root`` must be completable by some finite text, or a reply that gets there has no
    next token (the runner would abort in ``llama_grammar_accept_impl``). Linear in the grammar's size."""
    g = _Gbnf(grammar)
    g.read()
    live = _completable(g)
    root = g.ids.get("root", 0)
    seen, todo = {root}, [root]
    while todo:
        k = todo.pop()
        name = "a group" if g.names[k].startswith("(") else f"the rule {g.names[k]}"
        for seq in g.alts[k]:
            for kind, payload, _, text in seq:
                if kind == "class" and not payload:
                    return f"{name} holds the class {text[:80]}, which matches no character"
                if kind == "ref" and not live[payload]:
                    return f"{name} needs {text[:80]}, which no finite text completes"
                if kind == "ref" and payload not in seen:
                    seen.add(payload)
                    todo.append(payload)
    return None


def _completable(g: _Gbnf) -> list[bool]:
    """Which nonterminals some finite text completes: those with an alternative whose required
    elements (repeated at least once) are all completable, found with a worklist (each use once)."""
    live = [False] * len(g.alts)
    waiting = [[0] * len(alts) for alts in g.alts]  # per alternative: required refs not yet known live
    users: list[list[tuple[int, int]]] = [[] for _ in g.alts]
    ready = []
    for k, alts in enumerate(g.alts):
        for a, seq in enumerate(alts):
            if any(e[2] > 0 and e[0] == "class" and not e[1] for e in seq):
                continue  # a required class that matches nothing: this alternative never completes
            needed = [e[1] for e in seq if e[2] > 0 and e[0] == "ref"]
            waiting[k][a] = len(needed)
            for target in needed:
                users[target].append((k, a))
            if not needed:
                ready.append(k)
    while ready:
        k = ready.pop()
        if live[k]:
            continue
        live[k] = True
        for user, a in users[k]:
            waiting[user][a] -= 1
            if not waiting[user][a]:
                ready.append(user)
    return live


def main() -> int:
    """The child: read a grammar on stdin, print ``ok`` if llama.cpp's parser accepts it and the walk
    finds no point where it gets stuck."""
    grammar = sys.stdin.buffer.read()
    lib = _libllama()
    sampler = lib.llama_sampler_init_grammar(None, grammar, b"root")
    if not sampler:
        return 1
    lib.llama_sampler_free(sampler)
    sys.setrecursionlimit(20_000)  # groups nest as deep as a repetition count (500, see limits.py)
    try:
        stuck = dead_end(grammar.decode("utf-8"))
    except (RecursionError, ValueError, IndexError) as exc:
        stuck = f"the walk could not read it ({type(exc).__name__})"
    if stuck:
        sys.stderr.write(f"error: the grammar can get stuck: {stuck}\n")
        return 1
    sys.stdout.write("ok\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Compile a grammar once with llama.cpp's own parser, in a short-lived process, before a runner sees it.

llama.cpp's grammar parser runs inside the runner that every client of a model shares, and a grammar
it refuses makes llama-cpp-python add a null sampler, which ends that runner by SIGSEGV. The limits
in ``limits.py`` keep known bombs out; this check catches whatever they miss: the grammar is parsed
by ``llama_sampler_init_grammar`` in a child process of its own (no model: the parser needs no
vocabulary), under a memory limit and a timeout, so a refusal, a crash or a blow-up costs that child
only and comes back as a ``GrammarRejected`` naming what llama.cpp said. Verdicts are cached by the
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
    return [sys.executable, "-m", "fireside.engine.runtime.grammarcheck"]


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


def main() -> int:
    """The child: read a grammar on stdin, print ``ok`` if llama.cpp's parser accepts it."""
    grammar = sys.stdin.buffer.read()
    lib = _libllama()
    sampler = lib.llama_sampler_init_grammar(None, grammar, b"root")
    if not sampler:
        return 1
    lib.llama_sampler_free(sampler)
    sys.stdout.write("ok\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The runner's side of the process boundary: the code that runs inside a runner process, one per
loaded model, and owns its llama.cpp context.

``process.py`` is the process (the pipe reader and the one worker thread that owns the ``Llama``);
``batch.py`` decodes the requests of every slot together, step by step, in a context that gives each slot a KV
stream of its own (``kvstreams.py``); ``gather.py`` lets requests sent together share their first step;
``sampler.py`` samples each sequence; ``decode.py`` turns tokens into text and a reply's usage; ``tokens.py``
tokenizes prompts; ``kvstate.py`` restores and saves slots' KV states in the prompt cache; ``threads.py``
times each step and chooses its thread counts, within the share of the cores the runtime gives the runner;
``calibration.py`` is the attention calibration's process (``runtime/attention.py`` starts it by name).
Nothing here is imported by the server's side: the runtime starts a runner with ``python -m
fireside.engine.runner`` (``__main__.py``; a frozen install with ``--fireside-runner``,
``installers/entry.py``) and talks to it through the ground floor's ``protocol.py``. It imports nothing of the
engine but the ground floor.

Offers (the server's side uses nothing else): the prompt cache folder's format, ``kvcache`` (entries, sizes,
clearing) and its ``CacheConfig``; ``kvstate.py`` is the runner's reader and writer of it. Names load on
first use, so the server's side never loads the runner's modules.
"""

from __future__ import annotations

from ..faces import lazy

# name -> the inner module that holds it (a name equal to its module's is the module itself)
_WHERE = {
    "kvcache": "kvcache",
    "CacheConfig": "kvcache",
}
__all__ = ["CacheConfig", "kvcache"]
__getattr__, __dir__ = lazy(__name__, _WHERE)

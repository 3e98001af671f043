"""Local models, split at the process boundary. llama.cpp can end its process, so each loaded model runs
in a runner process of its own, and this package is in two wings:

- the server's side (this folder), in the app process or ``fireside serve``: ``runtime.py`` (the
  ``Runtime``: loads, just-in-time loading, idle unloads, requests), ``client.py`` (one runner's handle),
  ``healing.py`` (loads retried after a crash), ``templates.py`` and ``sandbox.py`` (chat templates),
  ``grammar.py``, ``strictjson.py``, ``limits.py`` and ``grammarcheck.py`` (grammars, refused before
  a runner sees them; the check runs in a short-lived process of its own), ``parsing.py`` (reasoning
  and tool calls in a reply) and ``kvcache.py`` (the prompt cache folder);
- the runner's side (``runner/``), inside each runner process: the worker that owns the ``Llama``,
  batching, sampling, decoding, tokenizing and the prompt cache's reader and writer.

``protocol.py`` is the pipe between them, the one module both sides import besides the prompt cache
folder's format (``kvcache.py``); ``tests/test_import_graph.py`` holds the line.
"""

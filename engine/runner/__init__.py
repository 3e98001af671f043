"""The runner's side of the process boundary: the code that runs inside a runner process, one per
loaded model, and owns its llama.cpp context.

``process.py`` is the process (the pipe reader and the one worker thread that owns the ``Llama``);
``batch.py`` decodes the requests of every slot together, step by step; ``sampler.py`` samples each
sequence; ``decode.py`` turns tokens into text and a reply's usage; ``tokens.py`` tokenizes prompts;
``kvstate.py`` restores and saves slots' KV states in the prompt cache; ``threads.py`` times each
step and chooses its thread counts, within the share of the cores the runtime gives the runner. Nothing here is imported by
the server's side: the runtime starts a runner with ``python -m fireside.engine.runner``
(``__main__.py``; a frozen install with ``--fireside-runner``, ``installers/entry.py``) and talks to
it through ``protocol.py``. From the server's side this wing imports only that module and
the prompt cache folder's format, ``runner/kvcache.py``.
"""

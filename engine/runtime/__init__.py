"""The runners' owner, on the server's side of the process boundary: ``Runtime`` (``runtime.py``) loads local
models, each into a runner process of its own (started by ``loading.py``; ``client.py`` is one runner's
handle), loads them just in time and unloads them when idle, retries a load that crashed with workarounds
(``healing.py``), knows the requests on their way to a runner (``arrivals.py``), splits the cores between the
runners decoding (``threadbudget.py``) and sets up embedding models (``embedders.py``). What runs inside a
runner is the ``runner/`` wing; prompts come from ``prompts/``, grammars and reply checks from
``structured/``.

Offers: ``Runtime`` and its ``ProgressFn``; ``Arrivals`` and ``Ticket``; ``Workarounds``; ``attention`` (the
measured attention kinds, ``attention.py``). Names load on first use.
"""

from __future__ import annotations

from ..faces import lazy

# name -> the inner module that holds it (a name equal to its module's is the module itself)
_WHERE = {
    "ProgressFn": "loading",
    "Runtime": "runtime",
    "Arrivals": "arrivals",
    "Ticket": "arrivals",
    "Workarounds": "healing",
    "attention": "attention",
}
__all__ = ["Arrivals", "ProgressFn", "Runtime", "Ticket", "Workarounds", "attention"]
__getattr__, __dir__ = lazy(__name__, _WHERE)

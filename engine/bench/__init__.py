"""``fireside bench``: one load generator that measures any OpenAI-compatible server, or Fireside's own
runtime, the way ``vllm bench serve`` does.

``workload.py`` makes the prompts (random words from a seed, or lines of a prompt file);
``targets.py`` sends one streamed request and times it (``HttpTarget`` over SSE, ``LocalTarget``
straight through a ``Runtime``); ``sweep.py`` runs the warm-up and the concurrency levels;
``metrics.py`` turns timed requests into per-level figures (throughput, TTFT, TPOT, ITL percentiles,
and a check of the tokens the server gave against those asked for); ``report.py`` prints the table
and writes the JSON and the plot.

Offers the names in ``__all__``; each loads its module on first use.
"""

from __future__ import annotations

from ..faces import lazy

# name -> the inner module that holds it (a name equal to its module's is the module itself)
_WHERE = {
    "BenchConfig": "sweep",
    "BenchError": "sweep",
    "BenchReport": "sweep",
    "run_sweep": "sweep",
    "LevelResult": "metrics",
    "Stat": "metrics",
    "write_json": "report",
    "write_plot": "report",
    "HttpTarget": "targets",
    "LocalTarget": "targets",
}
__all__ = ["BenchConfig", "BenchError", "BenchReport", "HttpTarget", "LevelResult", "LocalTarget", "Stat",
           "run_sweep", "write_json", "write_plot"]
__getattr__, __dir__ = lazy(__name__, _WHERE)

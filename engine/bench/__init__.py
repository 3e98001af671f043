"""``fireside bench``: one load generator that measures any OpenAI-compatible server, or Fireside's own
runtime, the way ``vllm bench serve`` does.

``workload.py`` makes the prompts (random words from a seed, or lines of a prompt file);
``targets.py`` sends one streamed request and times it (``HttpTarget`` over SSE, ``LocalTarget``
straight through a ``Runtime``); ``sweep.py`` runs the warm-up and the concurrency levels;
``metrics.py`` turns timed requests into per-level figures (throughput, TTFT, TPOT, ITL percentiles,
and a check of the tokens the server gave against those asked for); ``report.py`` prints the table
and writes the JSON and the plot.
"""

from .sweep import BenchConfig, run_sweep

__all__ = ["BenchConfig", "run_sweep"]

"""The benchmark's files: a JSON report for scripts and a PNG plot (the table is the CLI's).

The JSON holds the run's settings and, per level, every figure with its mean, p50, p90 and p99.
The plot has two panels against concurrency: aggregate output throughput, and the p99 of TTFT, TPOT
and ITL (log scale, since TTFT is often orders of magnitude above the others). matplotlib is imported only to draw, with the Agg
backend, so this works on a machine without a display.
"""

from __future__ import annotations

import json
from pathlib import Path

from .sweep import BenchReport


def write_json(report: BenchReport, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report.to_dict(), indent=2) + "\n", encoding="utf-8")


def write_plot(report: BenchReport, path: Path) -> None:
    """Throughput and p99 latencies against concurrency, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    levels = report.levels
    x = [lv.concurrency for lv in levels]
    fig = Figure(figsize=(10, 4.2), dpi=110)
    left, right = fig.subplots(1, 2)
    left.plot(x, [lv.output_tokens_per_s for lv in levels], marker="o", color="tab:blue")
    left.set(title="Output throughput", xlabel="concurrency", ylabel="output tokens/s")
    left.set_ylim(bottom=0)  # from zero, so a small wobble does not look like a collapse
    for name, attr, color in (("TTFT", "ttft_ms", "tab:red"), ("TPOT", "tpot_ms", "tab:green"),
                              ("ITL", "itl_ms", "tab:purple")):
        right.plot(x, [max(getattr(lv, attr).p99, 1e-3) for lv in levels], marker="o", label=f"{name} p99",
                   color=color)
    right.set(title="p99 latency", xlabel="concurrency", ylabel="ms", yscale="log")
    right.legend()
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xticks(x, [str(c) for c in x])
        ax.grid(True, alpha=0.3)
    fig.suptitle(f"{report.model or report.target}: {report.config.input_len} in / "
                 f"{report.config.output_len} out tokens", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")

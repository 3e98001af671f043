"""Sizes and counts as people read them, one convention for the CLI and the app.

Sizes are decimal (SI: 1 KB = 1000 bytes, 1 GB = 10^9), because that is how the tools Fireside's users
compare it with show them: Ollama's ``ollama list`` and LM Studio's model lists both print decimal
GB/MB, and so do the Hugging Face hub's file sizes and every disk vendor. A model shown as "1.9 GB"
here is the same "1.9 GB" there. (Memory budgets inside the fit planner's error messages keep GiB,
where the figure is compared with llama.cpp's own MiB logs.)

Counts (parameters, downloads) use K, M and B (10^3, 10^6, 10^9), as model names do ("135M", "8B").
"""

from __future__ import annotations

UNITS = ("B", "KB", "MB", "GB", "TB")


def human_bytes(n: float) -> str:
    """``1_900_000_000`` -> ``"1.9 GB"``; bytes and kilobytes whole, larger units to one decimal."""
    n = float(n)
    for unit in UNITS:
        if abs(n) < 1000 or unit == UNITS[-1]:
            return f"{n:.0f} {unit}" if unit in ("B", "KB") else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable: the last unit always returns")


def human_count(n: float) -> str:
    """``134_515_008`` -> ``"135M"``, ``1_711_376_384`` -> ``"1.7B"``, ``950`` -> ``"950"``."""
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.1f}{unit}" if unit in ("T", "B") else f"{n / size:.0f}{unit}"
    return str(int(n))


def draft_share(drafted: int, accepted: int) -> str:
    """``"drafts 30/40 accepted (75%)"``: how much of speculative decoding's guessing was kept; empty
    when nothing was drafted."""
    if not drafted:
        return ""
    return f"drafts {accepted:,}/{drafted:,} accepted ({100 * accepted / drafted:.0f}%)"

"""Retrieval over the Python documentation that Debian ships (``apt-get install python3-doc``): recall@5
and MRR for BM25 alone, vectors alone and the two fused, with the default install's embedder; indexing
time and query latency.

Two question sets, each naming the HTML file, the heading of the section that answers it and (held-out
set) a piece of text the answering passage holds:

- ``heldout`` (the default): ``bench/data/python_docs_heldout.tsv``, 106 questions written for issue 44
  from 60 pages of the library reference that no earlier question drew on; the corpus is exactly those
  60 pages. Rows alternate between two halves: the even rows tuned the ranking (passage size, headings,
  fusion), the odd rows are the held-out half, never looked at while tuning. A hit counts when it comes
  from that file, lies in that section and holds that text.
- ``original``: ``bench/data/python_docs_questions.tsv``, the 140 questions the first ranking was tuned
  on; a hit is the file and section. The corpus is every page (530 for Python 3.11), or ``--pages N``.

The embedder is a model id the runtime can embed with: by default ``minilm``, the built-in embedder that
``fireside serve`` and the app use with no option (converted at first use, which is timed apart).
"Index" is the wall time from the first page read to the last passage's vector, the embedder's load
included: what a user waits for before searches fuse keywords and vectors. MRR is over the top 10.
The last line is ``retrieval: held-out recall@5 X.XX, MRR Y.YY, index Z s``.

    nice -n 10 python bench/retrieval.py [--set heldout|original] [--embedder minilm|starter|none|hashed|ID]
"""

from __future__ import annotations

import argparse
import atexit
import glob
import math
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
import zlib
from pathlib import Path

from fireside.engine.documents import DocumentIndex, Embedder
from fireside.engine.documents.chunking import chunk_document
from fireside.engine.documents.readers import read_document

HERE = Path(__file__).resolve().parent
QUESTIONS = HERE / "data" / "python_docs_questions.tsv"
HELDOUT = HERE / "data" / "python_docs_heldout.tsv"


def load_questions(path: Path) -> list[tuple[str, str, str, str]]:
    """(question, file, heading, text the answer holds: '' where the set names none)."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            question, file, heading, *needle = line.split("\t")
            rows.append((question, file, heading, needle[0] if needle else ""))
    return rows


def halves(questions: list) -> tuple[list, list]:
    """(tuning half, held-out half): the even rows and the odd rows."""
    return questions[0::2], questions[1::2]


def pick_pages(docs: Path, questions, limit: int | None) -> list[Path]:
    every = sorted(Path(p) for p in glob.glob(str(docs / "**" / "*.html"), recursive=True))
    needed = {docs / q[1] for q in questions}
    others = [p for p in every if p not in needed]
    random.Random(31).shuffle(others)
    room = len(others) if limit is None else max(0, limit - len(needed))
    return sorted(needed) + others[:room]


def within_budget(docs: Path, questions, budget: int):
    """The questions whose answer pages, taken smallest first, hold at most ``budget`` passages in all:
    a subset that a slow embedder can index in bounded time."""
    sizes = {f: len(chunk_document(read_document(docs / f))) for f in {q[1] for q in questions}}
    kept, total = set(), 0
    for f in sorted(sizes, key=lambda f: (sizes[f], f)):
        if total + sizes[f] > budget:
            break
        kept.add(f)
        total += sizes[f]
    return [q for q in questions if q[1] in kept]


def hashed(texts: list[str], width: int = 384) -> list[list[float]]:
    """A stand-in embedder for timing at scale (``--embedder hashed``): each word hashed into one of 384
    buckets (all-MiniLM's width), normalized. Its recall says nothing about meaning; its vector search
    costs what a real 384-wide embedder's does, without hours of embedding on two cores."""
    out = []
    for text in texts:
        v = [0.0] * width
        for word in re.findall(r"\w+", text.lower()):
            v[zlib.crc32(word.encode()) % width] += 1.0
        norm = math.sqrt(sum(x * x for x in v)) or 1.0
        out.append([x / norm for x in v])
    return out


def build(index: DocumentIndex, pages: list[Path]) -> dict:
    """Index every page: reading, chunking and FTS5 timed apart from embedding."""
    t0, cpu0, chunks, chars = time.perf_counter(), time.process_time(), 0, 0
    embedder, index.embedder = index.embedder, None  # BM25 side first, so its speed is its own
    for page in pages:
        doc = read_document(page)
        chunks += index.add_document(doc).chunks
        chars += len(doc.text)
    t_text = time.perf_counter() - t0
    index.embedder = embedder
    t1 = time.perf_counter()
    embedded = index.embed_missing(on_progress=_progress) if embedder else 0
    t_embed = time.perf_counter() - t1
    return {"pages": len(pages), "chunks": chunks, "chars": chars, "t_text": t_text, "embedded": embedded,
            "t_embed": t_embed, "cpu_runner": _runner_cpu(), "cpu_self": time.process_time() - cpu0}


def _runner_cpu() -> float:
    """CPU seconds the runner processes (this process's children) have used: on a shared machine the wall
    time says how busy the others were; this says what the embedding itself cost."""
    import psutil

    total = 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            times = child.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def _progress(done: int, total: int) -> None:
    print(f"\r  embedding {done}/{total}", end="", file=sys.stderr, flush=True)
    if done == total:
        print(file=sys.stderr)


def rank_of(hits, file: str, heading: str, needle: str, docs: Path) -> int | None:
    target = str((docs / file).resolve())
    for rank, hit in enumerate(hits, 1):
        if hit.path == target and heading in hit.heading.split(" > ") and needle in hit.text:
            return rank
    return None


def evaluate(index: DocumentIndex, questions, docs: Path, modes: list[str]) -> dict[str, dict]:
    out = {}
    for mode in modes:
        ranks, times = [], []
        for question, file, heading, needle in questions:
            t = time.perf_counter()
            result = index.search(question, k=10, mode=mode)
            times.append((time.perf_counter() - t) * 1000)
            ranks.append(rank_of(result.hits, file, heading, needle, docs))
        out[mode] = {"recall@5": sum(1 for r in ranks if r and r <= 5) / len(ranks),
                     "recall@10": sum(1 for r in ranks if r) / len(ranks),
                     "mrr": sum(1 / r for r in ranks if r) / len(ranks), "ranks": ranks, "times": times}
    return out


def latency(index: DocumentIndex, questions, mode: str, count: int) -> tuple[float, float]:
    """p50 and p99 of ``count`` searches in ``mode``, in ms (the question's embedding included)."""
    pool = [q[0] for q in questions]
    times = []
    for i in range(count):
        t = time.perf_counter()
        index.search(pool[i % len(pool)], k=5, mode=mode)
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(len(times) * 0.99))]


def main() -> int:
    args = _args()
    docs = args.docs.resolve()
    if args.set == "heldout":
        questions = load_questions(HELDOUT)
        pages = sorted({docs / q[1] for q in questions})
    else:
        questions = load_questions(QUESTIONS)[:args.questions]
        if args.budget is not None:
            questions = within_budget(docs, questions, args.budget)
        pages = pick_pages(docs, questions, args.pages)
    runtime, embedder, t_convert = _embedder(args)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            index = DocumentIndex(args.keep or Path(tmp) / "index.db", embedder)
            built = build(index, pages)
            report(index, built, questions, args, embedder, t_convert)
    finally:
        if runtime is not None:
            runtime.close()
    return 0


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    found = sorted(glob.glob("/usr/share/doc/python3*/html"))
    ap.add_argument("--docs", type=Path, default=Path(next((d for d in found if "python3." in d), found[0] if found else "")))
    ap.add_argument("--set", choices=("heldout", "original"), default="heldout", help="which questions (see above)")
    ap.add_argument("--pages", type=int, default=None, help="original set: the answer pages plus others up to N")
    ap.add_argument("--embedder", default="minilm", help="a model id the runtime can embed with, 'hashed' or 'none'")
    ap.add_argument("--questions", type=int, default=None, help="original set: only the first N questions")
    ap.add_argument("--queries", type=int, default=200, help="queries timed for latency per mode")
    ap.add_argument("--keep", type=Path, default=None, help="build the index in this (new) file and keep it")
    ap.add_argument("--threads", type=int, default=None,
                    help="the embedder's threads (default: chosen by the runner from measured step times)")
    ap.add_argument("--budget", type=int, default=None,
                    help="original set: only the questions whose answer pages, smallest first, hold this many passages")
    return ap.parse_args()


def _embedder(args):
    """(runtime or None, Embedder or None, seconds the built-in embedder's first-use conversion took)."""
    if args.embedder == "hashed":
        return None, Embedder("hashed-384", hashed), 0.0
    if args.embedder == "none":
        return None, None, 0.0
    from fireside.engine.library import Library
    from fireside.engine.models.fitplan import LoadOptions
    from fireside.engine.runtime.runtime import Runtime
    from fireside.engine.settings import Settings

    home = tempfile.mkdtemp(prefix="fireside-bench-")
    atexit.register(shutil.rmtree, home, True)  # its converted embedder and runner logs (46 MB a run)
    settings = Settings.from_env({"FIRESIDE_HOME": home})
    settings.ensure_dirs()
    library = Library(settings)
    t = time.perf_counter()
    library.list()  # the built-in embedder is converted here, at its first listing, as in `fireside serve`
    t_convert = time.perf_counter() - t
    runtime = Runtime(settings, resolver=lambda ref: library.get(ref).path, idle_ttl_s=0,
                      load_defaults=LoadOptions(threads=args.threads))
    return runtime, Embedder.from_engine(runtime, library.get(args.embedder).id), t_convert


def _load() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def report(index, built, questions, args, embedder, t_convert: float) -> None:
    docs = args.docs.resolve()
    print(f"corpus: {built['pages']} HTML pages of {docs} ({built['chunks']:,} passages, {built['chars']:,} "
          f"characters = {built['chars'] / 2000:,.0f} pages of 2,000 characters); {len(questions)} questions")
    print(f"indexing (read, chunk, FTS5): {built['t_text']:.1f} s = {built['pages'] / built['t_text']:.1f} pages/s, "
          f"{built['chunks'] / built['t_text']:,.0f} passages/s")
    if embedder:
        rate = built["embedded"] / built["t_embed"] if built["t_embed"] else 0.0
        print(f"embedding ({embedder.name}, its load included): {built['embedded']:,} passages in {built['t_embed']:.1f} s "
              f"= {rate:.2f} passages/s; first-use conversion {t_convert:.1f} s (once per install, not counted)")
        print(f"  the runner used {built['cpu_runner']:.0f} CPU seconds (its load included), this process "
              f"{built['cpu_self']:.1f} (reading, chunking, SQLite): on two idle cores, between "
              f"{(built['cpu_runner'] + built['cpu_self']) / 2:.0f} s (both threads gaining) and "
              f"{built['cpu_runner'] + built['cpu_self']:.0f} s (one); load average now {_load()}")
    modes = ["bm25", "vectors", "fused"] if embedder else ["bm25"]
    parts = dict(zip(("tuning half", "held-out half"), halves(questions))) if args.set == "heldout" else {"all": questions}
    for part, asked in parts.items():
        results = evaluate(index, asked, docs, modes)
        print(f"{part} ({len(asked)} questions):")
        print(f"  {'mode':8} {'recall@5':>9} {'recall@10':>10} {'MRR@10':>7} {'p50 ms':>7} {'p99 ms':>7}")
        for mode, r in results.items():
            times = sorted(r["times"])
            print(f"  {mode:8} {r['recall@5']:9.3f} {r['recall@10']:10.3f} {r['mrr']:7.3f} "
                  f"{statistics.median(times):7.1f} {times[min(len(times) - 1, int(len(times) * 0.99))]:7.1f}")
        missed = [q[0] for q, r in zip(asked, results[modes[-1]]["ranks"]) if not r or r > 5]
        print(f"  {modes[-1]} misses at 5 ({len(missed)}):", *[f"    {q}" for q in missed[:15]], sep="\n")
    for mode in modes:
        p50, p99 = latency(index, questions, mode, args.queries)
        print(f"{mode} query latency over {args.queries} queries: p50 {p50:.2f} ms, p99 {p99:.2f} ms")
    final = results[modes[-1]]
    label = "held-out" if args.set == "heldout" else args.set
    print(f"retrieval: {label} recall@5 {final['recall@5']:.2f}, MRR {final['mrr']:.2f}, "
          f"index {built['t_text'] + built['t_embed']:.0f} s")


if __name__ == "__main__":
    sys.exit(main())

"""Retrieval over the Python documentation that Debian ships (``apt-get install python3-doc``): recall@5
and MRR for BM25 alone, vectors alone and the two fused (reciprocal rank fusion), with the starter model
(SmolLM2-135M, mean pooling) as the embedder; indexing speed and query latency.

The questions (``bench/data/python_docs_questions.tsv``, 140 of them) were written by hand from the
docs; each names the HTML file and the heading of the section that answers it. A hit counts when it
comes from that file and lies in that section (the heading is on its heading path, so a subsection
counts). MRR is over the top 10.

The corpus is every HTML page under ``--docs`` (530 pages for Python 3.11), or, with ``--pages N``, the
pages that hold an answer plus others in a fixed shuffled order up to N. Embedding with the starter is
the slow part (seconds a passage on a busy two-core machine), so ``--pages`` bounds it; ``--embedder none``
runs BM25 alone. Indexing speed is reported for reading, chunking and FTS5 (pages/s) and for embedding
(passages/s) apart; latency p50/p99 is over ``--queries`` queries drawn from the questions.

    nice -n 10 python bench/retrieval.py [--pages 60] [--embedder starter|none|hashed|PATH.gguf] [--questions N] [--threads N]
"""

from __future__ import annotations

import argparse
import glob
import math
import random
import re
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


def load_questions(path: Path) -> list[tuple[str, str, str]]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            question, file, heading = line.split("\t")
            rows.append((question, file, heading))
    return rows


def pick_pages(docs: Path, questions, limit: int | None) -> list[Path]:
    every = sorted(Path(p) for p in glob.glob(str(docs / "**" / "*.html"), recursive=True))
    needed = {docs / f for _, f, _ in questions}
    others = [p for p in every if p not in needed]
    random.Random(31).shuffle(others)
    room = len(others) if limit is None else max(0, limit - len(needed))
    return sorted(needed) + others[:room]


def within_budget(docs: Path, questions, budget: int):
    """The questions whose answer pages, taken smallest first, hold at most ``budget`` passages in all:
    a subset that a slow embedder can index in bounded time."""
    sizes = {f: len(chunk_document(read_document(docs / f))) for f in {f for _, f, _ in questions}}
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
    t0, chunks, chars = time.perf_counter(), 0, 0
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
            "t_embed": t_embed}


def _progress(done: int, total: int) -> None:
    print(f"\r  embedding {done}/{total}", end="", file=sys.stderr, flush=True)
    if done == total:
        print(file=sys.stderr)


def rank_of(index: DocumentIndex, hits, file: str, heading: str, docs: Path) -> int | None:
    target = str((docs / file).resolve())
    for rank, hit in enumerate(hits, 1):
        if hit.path == target and heading in hit.heading.split(" > "):
            return rank
    return None


def evaluate(index: DocumentIndex, questions, docs: Path, modes: list[str]) -> dict[str, dict]:
    out = {}
    for mode in modes:
        ranks, times = [], []
        for question, file, heading in questions:
            t = time.perf_counter()
            result = index.search(question, k=10, mode=mode)
            times.append((time.perf_counter() - t) * 1000)
            ranks.append(rank_of(index, result.hits, file, heading, docs))
        out[mode] = {"recall@5": sum(1 for r in ranks if r and r <= 5) / len(ranks),
                     "recall@10": sum(1 for r in ranks if r) / len(ranks),
                     "mrr": sum(1 / r for r in ranks if r) / len(ranks), "ranks": ranks, "times": times}
    return out


def latency(index: DocumentIndex, questions, mode: str, count: int) -> tuple[float, float]:
    """p50 and p99 of ``count`` searches in ``mode``, in ms (the question's embedding included)."""
    pool = [q for q, _, _ in questions]
    times = []
    for i in range(count):
        t = time.perf_counter()
        index.search(pool[i % len(pool)], k=5, mode=mode)
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(len(times) * 0.99))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    found = sorted(glob.glob("/usr/share/doc/python3*/html"))
    ap.add_argument("--docs", type=Path, default=Path(next((d for d in found if "python3." in d), found[0] if found else "")))
    ap.add_argument("--pages", type=int, default=None, help="corpus size: the answer pages plus others up to N")
    ap.add_argument("--embedder", default="starter", help="a model id the runtime can embed with, or 'none'")
    ap.add_argument("--questions", type=int, default=None, help="use only the first N questions")
    ap.add_argument("--queries", type=int, default=1000, help="queries timed for latency (BM25)")
    ap.add_argument("--keep", type=Path, default=None, help="build the index in this (new) file and keep it")
    ap.add_argument("--threads", type=int, default=None,
                    help="the embedder's threads (default: the cores; on a busy machine 1 is several times faster)")
    ap.add_argument("--budget", type=int, default=None,
                    help="keep only the questions whose answer pages, smallest first, hold this many passages in all")
    args = ap.parse_args()
    questions = load_questions(QUESTIONS)[:args.questions]
    if args.budget is not None:
        questions = within_budget(args.docs.resolve(), questions, args.budget)
    pages = pick_pages(args.docs.resolve(), questions, args.pages)
    runtime = None
    embedder = None
    if args.embedder == "hashed":
        embedder = Embedder("hashed-384", hashed)
    elif args.embedder != "none":
        from fireside.engine.models.planner import LoadOptions
        from fireside.engine.runtime.runtime import Runtime
        from fireside.engine.settings import Settings

        runtime = Runtime(Settings.from_env({"FIRESIDE_HOME": tempfile.mkdtemp(prefix="fireside-bench-")}), idle_ttl_s=0,
                          load_defaults=LoadOptions(threads=args.threads))
        embedder = Embedder.from_engine(runtime, args.embedder)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            index = DocumentIndex(args.keep or Path(tmp) / "index.db", embedder)
            built = build(index, pages)
            report(index, built, questions, args, embedder)
    finally:
        if runtime is not None:
            runtime.close()
    return 0


def report(index, built, questions, args, embedder) -> None:
    docs = args.docs.resolve()
    print(f"corpus: {built['pages']} HTML pages of {docs} ({built['chunks']:,} passages, {built['chars']:,} "
          f"characters = {built['chars'] / 2000:,.0f} pages of 2,000 characters); {len(questions)} questions")
    print(f"indexing (read, chunk, FTS5): {built['t_text']:.1f} s = {built['pages'] / built['t_text']:.1f} pages/s, "
          f"{built['chunks'] / built['t_text']:,.0f} passages/s")
    if embedder:
        rate = built["embedded"] / built["t_embed"] if built["t_embed"] else 0.0
        print(f"embedding ({embedder.name}): {built['embedded']:,} passages in {built['t_embed']:.1f} s = "
              f"{rate:.2f} passages/s = {built['pages'] / built['t_embed']:.3f} pages/s")
    modes = ["bm25", "vectors", "fused"] if embedder else ["bm25"]
    results = evaluate(index, questions, docs, modes)
    print(f"{'mode':8} {'recall@5':>9} {'recall@10':>10} {'MRR@10':>7} {'p50 ms':>7} {'p99 ms':>7}")
    for mode, r in results.items():
        times = sorted(r["times"])
        print(f"{mode:8} {r['recall@5']:9.3f} {r['recall@10']:10.3f} {r['mrr']:7.3f} {statistics.median(times):7.1f} "
              f"{times[min(len(times) - 1, int(len(times) * 0.99))]:7.1f}")
    for mode in modes:
        p50, p99 = latency(index, questions, mode, args.queries)
        print(f"{mode} query latency over {args.queries} queries: p50 {p50:.2f} ms, p99 {p99:.2f} ms")
    missed = [q for (q, _, _), r in zip(questions, results[modes[-1]]["ranks"]) if not r or r > 5]
    print(f"{modes[-1]} misses at 5 ({len(missed)}):", *[f"  {q}" for q in missed[:15]], sep="\n")


if __name__ == "__main__":
    sys.exit(main())

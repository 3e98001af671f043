"""What reading documents outside the server's process costs a small file: the wall time from adding a
22-byte Markdown note to a new collection to the note being ``completed``. "Cold" is the first note of
freshly opened collections (the collection's worker and, since issue 42, a reader process start for it);
"warm" is a note added to a new collection later (a new worker, which takes the reader process the last
worker left); "batch" is the time per note when many are added to one collection at once (one reader
process serves them all). No embedder: the text alone. Each figure is a median.

    nice -n 10 python bench/document_reading.py [--repeats 10] [--batch 20]

The last line is ``document reading: cold X ms, warm Y ms, Z ms a note in a batch of M``.
"""

from __future__ import annotations

import argparse
import io
import statistics
import tempfile
import time
from pathlib import Path

from fireside.engine.documents.collections import Collections

NOTE = b"# Harbour\n\nThe ferry leaves at nine.\n"


def _wait(c: Collections, collection_id: str, count: int) -> None:
    deadline = time.monotonic() + 120
    while c.get(collection_id).counts["completed"] < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"{collection_id}: not indexed within 120 s: {c.get(collection_id).counts}")
        time.sleep(0.001)


def first_note(c: Collections) -> float:
    """Seconds from adding one note to a new collection (no worker running) to its being indexed."""
    note = c.uploads.save(io.BytesIO(NOTE), "note.md", "assistants")
    started = time.monotonic()
    store = c.create("one", [note.id])
    _wait(c, store.id, 1)
    took = time.monotonic() - started
    deadline = time.monotonic() + 30
    while any(c._indexer._workers.values()) and time.monotonic() < deadline:  # the next try starts a worker afresh
        time.sleep(0.005)
    return took


def batch(c: Collections, count: int) -> float:
    """Seconds per note when ``count`` notes are added to one collection together."""
    notes = [c.uploads.save(io.BytesIO(NOTE.replace(b"nine", str(i).encode())), f"n{i}.md", "assistants").id
             for i in range(count)]
    started = time.monotonic()
    store = c.create("many", notes)
    _wait(c, store.id, count)
    return (time.monotonic() - started) / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--batch", type=int, default=20)
    args = parser.parse_args()
    colds, warms, each = [], [], 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            c = Collections(Path(tmp) / f"knowledge-{i}")
            try:
                c.registry  # noqa: B018 - opened before timing
                colds.append(first_note(c))
                warms.append(first_note(c))
                if i == 0:
                    each = batch(c, args.batch)
            finally:
                c.close()
    for name, times in (("cold", colds), ("warm", warms)):
        print(f"{name} note: min {min(times) * 1000:.0f} ms, median {statistics.median(times) * 1000:.0f} ms, "
              f"max {max(times) * 1000:.0f} ms over {args.repeats}")
    print(f"document reading: cold {statistics.median(colds) * 1000:.0f} ms, warm {statistics.median(warms) * 1000:.0f} "
          f"ms, {each * 1000:.0f} ms a note in a batch of {args.batch}")


if __name__ == "__main__":
    main()

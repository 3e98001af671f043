"""Fuzzing the retrieval routes as a client uses them: a document uploaded (plain, hostile or cut
short), a vector store made with it, then a few random steps (search, list, a batch and its files, an
unknown batch, delete the file, delete the store), each answered 4xx or a valid reply, never a 500.
The documents are the costly ones of issue 42 (``hostile_docs.py``) and plain ones, made once; a
store's indexing runs in the server's background, so the steps meet files in every state.
Used by ``fuzz/fuzz_api.py``; ``run_scenario`` returns the first crash's outcome, else the last.
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

from hypothesis import strategies as st

from tests.helpers.apifuzz import FuzzServer, Outcome, is_crash, long_texts, texts
from tests.helpers.hostile_docs import form_drawing_pdf, header_heavy_docx, shared_stream_pdf

STEPS = ["search", "list", "batch", "batch_files", "unknown_batch", "cancel_batch", "delete_file", "delete_store"]


@functools.cache
def documents() -> dict[str, bytes]:
    """The documents a scenario uploads, by name (the suffix picks the reader)."""
    folder = Path(tempfile.mkdtemp(prefix="fireside-storefuzz-"))
    bomb = shared_stream_pdf(folder / "bomb.pdf", pages=1000, stream_bytes=4 * 1024 * 1024).read_bytes()
    return {"note.md": b"# Harbour\n\nThe ferry leaves at nine from the stone pier.\n",
            "bomb.pdf": bomb, "torn.pdf": bomb[:len(bomb) // 3],
            "forms.pdf": form_drawing_pdf(folder / "forms.pdf", draws=2000, form_bytes=64 * 1024).read_bytes(),
            "headers.docx": header_heavy_docx(folder / "headers.docx").read_bytes(),
            "small.pdf": shared_stream_pdf(folder / "small.pdf", pages=2, stream_bytes=2048).read_bytes(),
            "code.py": b"def ferry():\n    return 'nine'\n", "page.html": b"<h1>Pier</h1><p>Stone.</p>"}


scenarios = st.fixed_dictionaries({
    "doc": st.sampled_from(sorted(documents())), "rename": st.sampled_from(["", ".pdf", ".docx", ".md", ".exe"]),
    "cut": st.sampled_from([0, 0, 0, 10, 50, 90]), "purpose": st.sampled_from(["assistants", "user_data"]) | texts,
    "steps": st.lists(st.sampled_from(STEPS), max_size=5), "query": texts | long_texts})


def run_scenario(server: FuzzServer, value: dict) -> Outcome:
    """Upload, make a store, take the steps; the first crash's outcome, else the last answer's."""
    c = server.client
    name, data = value["doc"], documents()[value["doc"]]
    if value["cut"]:
        data = data[:len(data) * value["cut"] // 100]
    r = c.post("/v1/files", files={"file": (name + value["rename"], data)}, data={"purpose": str(value["purpose"])})
    last = Outcome(r.status_code, r.text)
    if r.status_code != 200 or is_crash(last):
        return last
    file_id = r.json()["id"]
    r = c.post("/v1/vector_stores", json={"name": "fuzz", "file_ids": [file_id]})
    last = Outcome(r.status_code, r.text)
    if r.status_code != 200:
        return last
    store, batch = r.json()["id"], "vsfb_unknown"
    for step in value["steps"]:
        r = _step(c, step, store, file_id, batch, value["query"])
        if step == "batch" and r.status_code == 200:
            batch = r.json()["id"]
        last = Outcome(r.status_code, r.text)
        if is_crash(last):
            return last
    c.delete(f"/v1/vector_stores/{store}")  # the store goes; its file, if still there, stays uploaded
    c.delete(f"/v1/files/{file_id}")
    return last


def _step(c, step: str, store: str, file_id: str, batch: str, query: str):
    base = f"/v1/vector_stores/{store}"
    if step == "search":
        return c.post(f"{base}/search", json={"query": query})
    if step == "list":
        return c.get(f"{base}/files")
    if step == "batch":
        return c.post(f"{base}/file_batches", json={"file_ids": [file_id]})
    if step in ("batch_files", "unknown_batch"):
        return c.get(f"{base}/file_batches/{batch if step == 'batch_files' else 'vsfb_nope'}/files")
    if step == "cancel_batch":
        return c.post(f"{base}/file_batches/{batch}/cancel")
    if step == "delete_file":
        return c.delete(f"/v1/files/{file_id}")
    return c.delete(base)

"""OpenAI's retrieval API, spoken to by the official ``openai`` client over a real server on loopback and the
real SmolLM2: files uploaded, vector stores built and searched, ``responses.create`` with ``file_search``
answering from them with ``file_search_call`` items and ``file_citation`` annotations, a restart keeping
every store, and bad input answered with a clear 4xx, never a 500."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from fireside.engine.documents.collections import Collections
from fireside.engine.server import SecurityPolicy, ServerThread, create_app
from fireside.engine.settings import Settings
from tests.engine.documents.files import write_pdf
from tests.helpers.driving import API_KEY

pytestmark = pytest.mark.model
LIGHTHOUSE = (b"# Skerry Point lighthouse\n\nThe keeper polishes the brass lens every Tuesday with a chamois cloth.\n\n"
              b"# Garden\n\nTomatoes grow in the walled garden behind the tower.\n")
PDF_PAGES = ["Orchard ledger\nThe quince trees were pruned in February.",
             "Bees\nThe beekeeper harvested forty jars of heather honey in August."]


def _serve(runtime, settings, library, collections, policy=None):
    thread = ServerThread(create_app(runtime, settings, library, collections=collections, policy=policy), "127.0.0.1", 0)
    thread.start()
    return thread


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Settings:
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path_factory.mktemp("retrieval-home"))})
    settings.ensure_dirs()
    return settings


@pytest.fixture(scope="module")
def served(runtime, home, library):
    collections = Collections(home.knowledge_dir)
    thread = _serve(runtime, home, library, collections)
    yield thread, collections
    thread.stop()
    collections.close()


@pytest.fixture(scope="module")
def oai(served) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{served[0].url}/v1", api_key="unused", max_retries=0, timeout=300)


@pytest.fixture(scope="module")
def pdf_bytes(tmp_path_factory) -> bytes:
    return write_pdf(tmp_path_factory.mktemp("pdf") / "orchard.pdf", PDF_PAGES).read_bytes()


@pytest.fixture(scope="module")
def store(oai, pdf_bytes):
    """A vector store holding lighthouse.md and orchard.pdf, both indexed: (store, md file, pdf file)."""
    md = oai.files.create(file=("lighthouse.md", LIGHTHOUSE), purpose="assistants")
    pdf = oai.files.create(file=("orchard.pdf", pdf_bytes), purpose="user_data")
    vs = oai.vector_stores.create(name="keeper's notes", file_ids=[md.id, pdf.id])
    for f in (md, pdf):
        assert oai.vector_stores.files.poll(f.id, vector_store_id=vs.id).status == "completed"
    return vs, md, pdf


def test_files_upload_list_retrieve_and_read_back(oai, store):
    _, md, pdf = store
    assert (md.filename, md.bytes, md.purpose, md.status) == ("lighthouse.md", len(LIGHTHOUSE), "assistants", "processed")
    assert {md.id, pdf.id} <= {f.id for f in oai.files.list()}
    assert [f.id for f in oai.files.list(purpose="user_data")] == [pdf.id]
    assert oai.files.retrieve(pdf.id).filename == "orchard.pdf"
    assert oai.files.content(md.id).read() == LIGHTHOUSE


def test_a_store_counts_its_files_and_search_finds_the_right_one(oai, store):
    vs, md, pdf = store
    got = oai.vector_stores.retrieve(vs.id)
    assert (got.name, got.status, got.file_counts.completed, got.file_counts.total) == ("keeper's notes", "completed", 2, 2)
    assert vs.id in [s.id for s in oai.vector_stores.list()]
    assert {f.id for f in oai.vector_stores.files.list(vs.id)} == {md.id, pdf.id}
    honey = oai.vector_stores.search(vs.id, query="How many jars of honey did the beekeeper harvest?", max_num_results=3)
    top = honey.data[0]
    assert (top.file_id, top.filename) == (pdf.id, "orchard.pdf")
    assert "forty jars of heather honey" in top.content[0].text and top.content[0].type == "text"
    assert 0 < top.score <= 1
    lens = oai.vector_stores.search(vs.id, query="brass lens chamois").data[0]
    assert (lens.file_id, lens.filename) == (md.id, "lighthouse.md")


def test_responses_file_search_answers_from_the_file_and_cites_it(oai, store):
    vs, md, _ = store
    r = oai.responses.create(model="starter", input="When does the keeper polish the brass lens?", temperature=0,
                             max_output_tokens=48, include=["file_search_call.results"],
                             tools=[{"type": "file_search", "vector_store_ids": [vs.id], "max_num_results": 2}])
    call, message = r.output[0], r.output[1]
    assert call.type == "file_search_call" and call.status == "completed"
    assert call.queries == ["When does the keeper polish the brass lens?"]
    assert call.results[0].file_id == md.id and "Tuesday" in call.results[0].text
    text = message.content[0]
    assert "Tuesday" in text.text  # the model read the passage
    cited = [a for a in text.annotations if a.type == "file_citation"]
    assert md.id in {a.file_id for a in cited} and all(0 <= a.index <= len(text.text) for a in cited)
    assert "lighthouse.md" in {a.filename for a in cited}
    plain = oai.responses.create(model="starter", input="the lens", max_output_tokens=4, tool_choice={"type": "file_search"},
                                 tools=[{"type": "file_search", "vector_store_ids": [vs.id]}])
    assert plain.output[0].type == "file_search_call" and plain.output[0].results is None  # results only when included
    unsearched = oai.responses.create(model="starter", input="the lens", max_output_tokens=4, tool_choice="none",
                                      tools=[{"type": "file_search", "vector_store_ids": [vs.id]}])
    assert [item.type for item in unsearched.output] == ["message"]
    assert unsearched.output[0].content[0].annotations == []


def test_a_source_marker_the_model_writes_becomes_an_annotation_at_its_place(oai, store):
    """The markers are cut from the text (OpenAI's text carries none) and each becomes a file_citation at the
    index it stood at; the model is held to a reply holding one by a JSON schema's const."""
    vs, md, _ = store
    fmt = {"type": "json_schema", "name": "answer", "schema": {"const": "Every Tuesday [1]."}}
    r = oai.responses.create(model="starter", input="When is the brass lens polished?", text={"format": fmt},
                             tools=[{"type": "file_search", "vector_store_ids": [vs.id], "max_num_results": 1}])
    text = r.output[1].content[0]
    assert text.text == '"Every Tuesday."'
    [cite] = text.annotations
    assert (cite.file_id, cite.filename, cite.index) == (md.id, "lighthouse.md", len('"Every Tuesday'))


def test_streamed_file_search_sends_the_call_item_then_the_cited_message(oai, store):
    vs, md, _ = store
    fmt = {"type": "json_schema", "name": "answer", "schema": {"const": "Tuesday [1]"}}
    events = list(oai.responses.create(model="starter", input="When is the brass lens polished?", stream=True,
                                       text={"format": fmt},
                                       tools=[{"type": "file_search", "vector_store_ids": [vs.id], "max_num_results": 1}]))
    kinds = [e.type for e in events]
    steps = ["response.file_search_call.in_progress", "response.file_search_call.searching",
             "response.file_search_call.completed"]
    assert [k for k in kinds if k.startswith("response.file_search_call")] == steps
    added = [e for e in events if e.type == "response.output_item.added"]
    assert [(e.output_index, e.item.type) for e in added] == [(0, "file_search_call"), (1, "message")]
    assert kinds.index(steps[-1]) < kinds.index("response.output_text.delta")
    [note] = [e for e in events if e.type == "response.output_text.annotation.added"]
    assert (note.annotation.file_id, note.output_index) == (md.id, 1)
    streamed = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    final = events[-1].response.output[1].content[0]
    assert streamed == final.text == '"Tuesday"' and final.annotations[0].file_id == md.id


def test_batches_add_files_and_deleting_takes_them_out(oai, pdf_bytes):
    notes = oai.files.create(file=("pantry.txt", b"The pantry holds twelve tins of sardines."), purpose="assistants")
    pdf = oai.files.create(file=("orchard.pdf", pdf_bytes), purpose="assistants")
    vs = oai.vector_stores.create(name="pantry")
    batch = oai.vector_stores.file_batches.create_and_poll(vector_store_id=vs.id, file_ids=[notes.id, pdf.id])
    assert (batch.status, batch.file_counts.completed) == ("completed", 2)
    assert oai.vector_stores.search(vs.id, query="sardines").data[0].file_id == notes.id
    cellar = oai.vector_stores.files.upload_and_poll(vector_store_id=vs.id, file=("cellar.md", b"# Cellar\n\nCider barrels."))
    assert cellar.status == "completed" and oai.files.retrieve(cellar.id).filename == "cellar.md"
    assert oai.vector_stores.search(vs.id, query="cider barrels").data[0].file_id == cellar.id
    oai.vector_stores.files.delete(cellar.id, vector_store_id=vs.id)
    oai.vector_stores.files.delete(notes.id, vector_store_id=vs.id)
    assert [d.file_id for d in oai.vector_stores.search(vs.id, query="sardines tins pantry").data] == []
    assert oai.files.retrieve(notes.id).id == notes.id  # out of the store, still uploaded
    assert oai.files.delete(pdf.id).deleted
    assert oai.vector_stores.retrieve(vs.id).file_counts.total == 0  # a deleted file leaves every store
    assert oai.vector_stores.delete(vs.id).deleted
    with pytest.raises(openai.NotFoundError):
        oai.vector_stores.retrieve(vs.id)


def test_a_restart_keeps_files_stores_and_their_indexes(runtime, library, tmp_path):
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path / "home")})
    settings.ensure_dirs()
    first = Collections(settings.knowledge_dir)
    thread = _serve(runtime, settings, library, first)
    client = openai.OpenAI(base_url=f"{thread.url}/v1", api_key="unused", max_retries=0)
    f = client.files.create(file=("pantry.md", b"# Pantry\n\nTwelve tins of sardines sit on the top shelf."),
                            purpose="assistants")
    vs = client.vector_stores.create(name="kept", file_ids=[f.id])
    assert client.vector_stores.files.poll(f.id, vector_store_id=vs.id).status == "completed"
    thread.stop()
    first.close()  # as a process that exits

    second = Collections(settings.knowledge_dir)
    thread = _serve(runtime, settings, library, second)
    try:
        client = openai.OpenAI(base_url=f"{thread.url}/v1", api_key="unused", max_retries=0)
        assert [s.name for s in client.vector_stores.list()] == ["kept"]
        assert client.files.retrieve(f.id).filename == "pantry.md"
        assert client.vector_stores.search(vs.id, query="sardines").data[0].file_id == f.id
    finally:
        thread.stop()
        second.close()


BAD_UPLOADS = [
    (("empty.md", b""), "empty.md is empty"),
    (("data.txt", bytes(range(256)) * 8), "binary data"),
    (("tool.exe", b"MZ\x90\x00"), "does not read .exe files"),
    (("scan.pdf", b"GIF89a not a pdf at all"), "not a PDF"),
    (("letter.docx", b"plain words, not a zip"), "not a zip archive"),
]


@pytest.mark.parametrize(("upload", "says"), BAD_UPLOADS, ids=[u[0][0] for u in BAD_UPLOADS])
def test_a_bad_upload_is_a_400_that_says_why_and_keeps_nothing(oai, upload, says):
    before = len(oai.files.list().data)
    with pytest.raises(openai.BadRequestError) as caught:
        oai.files.create(file=upload, purpose="assistants")
    assert says in caught.value.body["message"]
    assert len(oai.files.list().data) == before


def test_a_pdf_broken_past_its_header_fails_in_the_store_with_the_reason(oai, pdf_bytes):
    f = oai.files.create(file=("torn.pdf", pdf_bytes[: len(pdf_bytes) // 3]), purpose="assistants")
    vs = oai.vector_stores.create(file_ids=[f.id])
    got = oai.vector_stores.files.poll(f.id, vector_store_id=vs.id)
    assert got.status == "failed" and got.last_error.code == "invalid_file"
    assert "torn.pdf" in got.last_error.message
    assert oai.vector_stores.retrieve(vs.id).file_counts.failed == 1


def test_unknown_ids_and_unsupported_fields_are_4xx(oai, store):
    vs, md, _ = store
    missing = [lambda: oai.files.retrieve("file-nope"), lambda: oai.files.delete("file-nope"),
               lambda: oai.files.content("file-nope"), lambda: oai.vector_stores.retrieve("vs_nope"),
               lambda: oai.vector_stores.files.create(vector_store_id=vs.id, file_id="file-nope"),
               lambda: oai.vector_stores.files.create(vector_store_id="vs_nope", file_id=md.id),
               lambda: oai.vector_stores.create(file_ids=["file-nope"]),
               lambda: oai.vector_stores.search("vs_nope", query="lens"),
               lambda: oai.responses.create(model="starter", input="lens", tools=[
                   {"type": "file_search", "vector_store_ids": ["vs_nope"]}])]
    for call in missing:
        with pytest.raises(openai.NotFoundError) as caught:
            call()
        assert "nope" in caught.value.body["message"]
    bad = [lambda: oai.files.create(file=("a.md", b"# A"), purpose="fine-tune"),
           lambda: oai.vector_stores.search(vs.id, query="lens", filters={"type": "eq", "key": "a", "value": "b"}),
           lambda: oai.responses.create(model="starter", input="lens", tools=[{"type": "file_search", "vector_store_ids": []}])]
    for call in bad:
        with pytest.raises(openai.BadRequestError):
            call()


def test_an_upload_without_a_file_part_or_as_json_is_a_400(served):
    url = f"{served[0].url}/v1/files"
    assert httpx.post(url, data={"purpose": "assistants"}, files={"other": ("a.md", b"# A")}).status_code == 400
    r = httpx.post(url, content=json.dumps({"file": "a.md", "purpose": "assistants"}))
    assert r.status_code == 400 and r.json()["error"]["param"] == "file"


def _multipart_chunks(name: str, size: int):
    """A multipart upload sent in pieces, as a streaming client sends it (chunked: no Content-Length)."""
    yield b'--XyZ\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nassistants\r\n'
    yield f'--XyZ\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n\r\n'.encode()
    for _ in range(size // 100):
        yield b"words " * 16 + b"word"
    yield b"\r\n--XyZ--\r\n"


def test_an_upload_over_the_cap_is_a_413(runtime, library, tmp_path):
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path / "home")})
    collections = Collections(settings.knowledge_dir)
    thread = _serve(runtime, settings, library, collections, SecurityPolicy(max_upload_bytes=1000))
    try:
        client = openai.OpenAI(base_url=f"{thread.url}/v1", api_key="unused", max_retries=0)
        with pytest.raises(openai.APIStatusError) as caught:
            client.files.create(file=("big.txt", b"words " * 1000), purpose="assistants")
        assert caught.value.status_code == 413
        chunked = httpx.post(f"{thread.url}/v1/files", content=_multipart_chunks("big.txt", 5000),
                             headers={"content-type": "multipart/form-data; boundary=XyZ"})  # no Content-Length
        assert chunked.status_code == 413 and "1,000-byte limit" in chunked.json()["error"]["message"]
        assert client.files.create(file=("small.txt", b"words"), purpose="assistants").bytes == 5
        assert [f.filename for f in client.files.list()] == ["small.txt"]  # nothing of the refused ones kept
        elsewhere = httpx.post(f"{thread.url}/v1/chat/completions", content=_multipart_chunks("a.txt", 10),
                               headers={"content-type": "multipart/form-data; boundary=XyZ"})
        assert elsewhere.status_code == 400  # only the upload route takes a body that is not JSON
    finally:
        thread.stop()
        collections.close()


def test_the_retrieval_routes_need_the_api_key(keyed_server):
    wrong = openai.OpenAI(base_url=f"{keyed_server.url}/v1", api_key="wrong", max_retries=0)
    for call in (wrong.files.list, wrong.vector_stores.list,
                 lambda: wrong.files.create(file=("a.md", b"# A"), purpose="assistants")):
        with pytest.raises(openai.AuthenticationError):
            call()
    right = openai.OpenAI(base_url=f"{keyed_server.url}/v1", api_key=API_KEY, max_retries=0)
    assert right.files.create(file=("a.md", b"# A\n\nalpha"), purpose="assistants").filename == "a.md"

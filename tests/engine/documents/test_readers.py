"""Each reader on a real small file: the text comes out, PDF pages are numbered right, headings are kept
as the path a passage sits under, and chunks carry both."""

from __future__ import annotations

from fireside.engine.documents import chunk_document, read_document

from .files import write_docx, write_pdf

PAGES = ["Introduction\nThis manual covers the Harbor tide gauge.",
         "Calibration\nSet the float arm to the zero mark before each spring tide.",
         "Storage\nKeep the gauge dry in winter; the ink freezes below minus four degrees."]


def test_a_pdf_keeps_its_page_numbers_and_outline(tmp_path):
    pdf = write_pdf(tmp_path / "gauge.pdf", PAGES, outline=[("Introduction", 1), ("Calibration", 2), ("Storage", 3)])
    doc = read_document(pdf)
    assert doc.kind == "pdf" and doc.pages == 3
    on_page = {b.page: b for b in doc.blocks}
    assert "float arm" in on_page[2].text and on_page[2].headings == ("Calibration",)
    assert "ink freezes" in on_page[3].text and on_page[3].headings == ("Storage",)
    [chunk] = [c for c in chunk_document(doc) if "float arm" in c.text]
    assert (chunk.page, chunk.page_end, chunk.heading) == (2, 2, "Calibration")


def test_a_docx_keeps_headings_tables_and_page_breaks(tmp_path):
    doc = read_document(write_docx(tmp_path / "manual.docx"))
    assert doc.kind == "docx"
    by_text = {b.text: b for b in doc.blocks}
    polish = by_text["The lamp room lens must be polished every Tuesday with a chamois cloth."]
    assert polish.headings == ("Lighthouse Maintenance Manual", "Lamp Room") and polish.page == 1
    oil = by_text["The fog horn compressor needs fresh oil after 200 hours of running."]
    assert oil.headings == ("Lighthouse Maintenance Manual", "Fog Signal") and oil.page == 2
    assert any("Diaphragm | Five years" in b.text for b in doc.blocks)
    chunks = chunk_document(doc)
    assert [c.heading for c in chunks] == ["Lighthouse Maintenance Manual > Lamp Room",
                                           "Lighthouse Maintenance Manual > Fog Signal"]


def test_html_keeps_headings_and_code_and_skips_navigation(tmp_path):
    page = tmp_path / "guide.html"
    page.write_text("<html><head><title>Guide</title><script>var x = 'secret';</script></head><body>"
                    "<div role='navigation'><a href='/'>Home</a> sidebar links</div>"
                    "<h1>Kettles<a class='headerlink' href='#k'>¶</a></h1><p>A kettle boils water.</p>"
                    "<h2>Descaling</h2><p>Use <b>white vinegar</b> once a month.<br>Rinse twice.</p>"
                    "<pre>descale --vinegar\n  --rinse 2</pre><footer>Copyright</footer></body></html>")
    doc = read_document(page)
    assert doc.title == "Guide"
    texts = [(b.kind, b.text, b.headings) for b in doc.blocks]
    assert ("paragraph", "Use white vinegar once a month. Rinse twice.", ("Kettles", "Descaling")) in texts
    assert ("code", "descale --vinegar\n  --rinse 2", ("Kettles", "Descaling")) in texts
    joined = doc.text
    assert "sidebar" not in joined and "secret" not in joined and "Copyright" not in joined and "¶" not in joined


def test_markdown_splits_at_headings_and_keeps_fenced_code_whole(tmp_path):
    md = tmp_path / "notes.md"
    md.write_text("# Garden\n\nIntro.\n\n## Tomatoes\n\nWater daily.\n\n```python\ndef water():\n\n    return 'daily'\n```\n"
                  "\n## Beans\n\nClimb poles.\n")
    chunks = chunk_document(read_document(md))
    assert [(c.heading, c.text) for c in chunks] == [
        ("Garden", "Intro."),
        ("Garden > Tomatoes", "Water daily.\n\n```python\ndef water():\n\n    return 'daily'\n```"),
        ("Garden > Beans", "Climb poles.")]


def test_source_code_is_split_at_definitions_and_plain_text_at_paragraphs(tmp_path):
    src = tmp_path / "tools.py"
    src.write_text("import os\n\n\ndef first():\n    return 1\n\n\nclass Second:\n    pass\n")
    doc = read_document(src)
    assert [b.headings for b in doc.blocks] == [("tools.py",), ("tools.py", "def first()"), ("tools.py", "class Second")]
    txt = tmp_path / "plain.txt"
    txt.write_text("caf\u00e9 one\n\nsecond paragraph\n", encoding="utf-8")
    assert [b.text for b in read_document(txt).blocks] == ["caf\u00e9 one", "second paragraph"]
    latin = tmp_path / "latin.txt"
    latin.write_bytes("na\u00efve".encode("cp1252"))
    assert read_document(latin).text == "na\u00efve"


def test_a_long_section_is_cut_into_chunks_under_the_limit_that_keep_its_heading(tmp_path):
    md = tmp_path / "long.md"
    md.write_text("# Long\n\n" + " ".join(f"Sentence number {i} is here." for i in range(400)) + "\n")
    chunks = chunk_document(read_document(md))
    assert len(chunks) > 3 and all(len(c.text) <= 1800 for c in chunks)
    assert {c.heading for c in chunks} == {"Long"}
    assert "Sentence number 399 is here." in chunks[-1].text

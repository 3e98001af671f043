"""Take docs/screenshots/chat-sources.png (a reply grounded in a PDF, with its sources open) and
docs/screenshots/chat-source-context.png (one source shown in its context).

    Xvfb :99 -screen 0 1280x800x24 & DISPLAY=:99 python docs/screenshots/take_sources.py

The real app in a throwaway Fireside home, with the real SmolLM2 starter model (135M parameters: its
answer is about the app, not about harbours). The PDF is written here with pypdf: a 60-page harbour
handbook with an outline, too long for a 4096-token context, so its passages are retrieved for the
question (by BM25: no embedder is chosen, and the sources say so). It is attached through the
composer's drop road.
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
HOME = Path(tempfile.mkdtemp(prefix="fireside-shots-"))
os.environ["FIRESIDE_HOME"] = str(HOME)

from PySide6.QtCore import QMimeData, QUrl  # noqa: E402

from docs.screenshots.take import shot, start_app, wait  # noqa: E402

CHAPTERS = ["Arrival", "Berths", "Pilotage", "Fees", "Fuel", "Waste", "Weather", "Departure"]
PAGES = 60
FACTS = {
    17: ["Pilotage is compulsory for vessels over 40 metres.", "A pilot boards at the outer buoy, "
         "two miles south of the breakwater, and stays until the vessel is secured."],
    24: ["The harbour pilot fee is forty-two crowns for each vessel, paid at the harbour office.",
         "Vessels under 40 metres that ask for a pilot pay half the fee."],
}
FILLER = ("Vessels keep to the marked channel and report to the harbour office on channel twelve. The quay "
          "is lit from dusk to dawn and the tide tables are posted beside the office door. Crews leave the "
          "mooring lines clear for the linesmen and keep fenders out while the swell runs").split(". ")


def handbook(path: Path) -> Path:
    from tests.engine.documents.files import write_pdf

    rng = random.Random(3)
    pages = []
    for number in range(1, PAGES + 1):
        lines = [f"Harbour Handbook, page {number}", ""]
        lines += FACTS.get(number, [rng.choice(FILLER) + "." for _ in range(6)])
        pages.append("\n".join(lines))
    outline = [(title, 1 + PAGES // len(CHAPTERS) * i) for i, title in enumerate(CHAPTERS)]
    return write_pdf(path, pages, outline)


def main() -> None:
    _app, fireside, window = start_app()
    fireside.ctx.prefs.put("load_options", "starter", {"context": 4096})
    page = window.chat
    page.new_chat()
    page.settings_panel.max_tokens.setValue(60)
    page.settings_panel.temperature.setValue(0)
    attached, ended = [], []
    page.document_attached.connect(attached.append)
    page.reply_ended.connect(lambda *a: ended.append(a))
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(handbook(HOME / "harbour-handbook.pdf")))])
    page.composer.insertFromMimeData(mime)
    wait(until=lambda: attached, timeout_ms=60_000)
    page.composer.setPlainText("How much is the harbour pilot fee?")
    page.send()
    wait(until=lambda: ended, timeout_ms=600_000)
    reply_id = ended[0][0]
    view = page.transcript.view(reply_id)
    view.sources.open_list()
    from tests.engine.documents.files import write_docx

    attached.clear()
    mime = QMimeData()  # one more document waiting in the composer: its chip
    mime.setUrls([QUrl.fromLocalFile(str(write_docx(HOME / "lighthouse-manual.docx")))])
    page.composer.insertFromMimeData(mime)
    wait(until=lambda: attached, timeout_ms=60_000)
    page.composer.setPlainText("And how often is the fog horn serviced?")
    wait(500)
    shot(window, "chat-sources")
    shown = []
    page.source_shown.connect(shown.append)
    view.sources.list.linkActivated.emit("source:1")
    wait(until=lambda: shown, timeout_ms=30_000)
    wait(500)
    shown[0].grab().save(str(OUT / "chat-source-context.png"))
    print("saved", OUT / "chat-source-context.png")
    print("reply:", fireside.ctx.store.message(reply_id).content)
    fireside.stop()


if __name__ == "__main__":
    main()

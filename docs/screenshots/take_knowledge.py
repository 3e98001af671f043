"""Take docs/screenshots/knowledge.png (the Knowledge page: a watched folder, a collection of chosen files,
one file refused) and docs/screenshots/knowledge-chat.png (a chat that ticked the folder's collection, its
reply's sources open, naming the collection's file).

    Xvfb :99 -screen 0 1280x800x24 & DISPLAY=:99 python docs/screenshots/take_knowledge.py

The real app in a throwaway Fireside home, with the real SmolLM2 starter model (135M parameters: its answer
is not expected to be right, the sources are the point). The folders and files are written here.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
HOME = Path(tempfile.mkdtemp(prefix="fireside-shots-"))
os.environ["FIRESIDE_HOME"] = str(HOME)

from docs.screenshots.take import shot, start_app, wait  # noqa: E402

NOTES = {
    "fees.md": "# Harbour fees\n\nThe harbour pilot fee is forty-two crowns for each vessel, paid at the harbour "
               "office.\n\nVessels under 40 metres that ask for a pilot pay half the fee.\n",
    "berths/east-quay.md": "# East quay\n\nBerths 1 to 6 take vessels up to 60 metres. Fresh water is at berth 3.\n",
    "berths/west-quay.md": "# West quay\n\nThe west quay is for fishing boats; yachts moor there only in a gale.\n",
    "weather.txt": "Fog rolls in most mornings in November; the horn sounds every thirty seconds.\n",
    "tides.csv": "date,high,low\n2026-12-01,06:12,12:30\n2026-12-02,06:58,13:15\n",
}


def write_folder(folder: Path) -> Path:
    for name, text in NOTES.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    (folder / "logo.txt").write_bytes(bytes(range(256)) * 64)  # binary data under a text name: refused
    return folder


def main() -> None:
    _app, fireside, window = start_app()
    fireside.ctx.prefs.put("load_options", "starter", {"context": 4096})
    knowledge = window.pages["Knowledge"]
    changed = []
    knowledge.collections_changed.connect(lambda: changed.append(1))
    knowledge.watch_folder(write_folder(HOME / "Harbour notes"))
    wait(until=lambda: changed, timeout_ms=60_000)
    manuals = HOME / "manuals"
    manuals.mkdir()
    (manuals / "fog-horn.md").write_text("# Fog horn\n\nOil the compressor every 200 hours of running.\n")
    (manuals / "lamp.md").write_text("# Lamp\n\nThe lens is polished every Tuesday.\n")
    knowledge.create_from_files([manuals / "fog-horn.md", manuals / "lamp.md"], "Lighthouse manuals")
    wait(until=lambda: len(changed) >= 2, timeout_ms=60_000)
    wait(until=lambda: knowledge.rows and all(r.collection.status == "completed" for r in knowledge.rows)
         and knowledge.tree.topLevelItemCount() == 2, timeout_ms=60_000)
    window.show_page("Knowledge")
    knowledge.tree.setCurrentItem(knowledge.tree.topLevelItem(0))
    shot(window, "knowledge")

    harbour = knowledge.rows[0].collection.id
    page = window.chat
    window.show_page("Chat")
    page.new_chat()
    page.settings_toggle.setChecked(True)
    wait(until=lambda: harbour in page.settings_panel.collection_boxes, timeout_ms=30_000)
    page.settings_panel.collection_boxes[harbour].setChecked(True)
    page.settings_panel.max_tokens.setValue(60)
    page.settings_panel.temperature.setValue(0)
    ended = []
    page.reply_ended.connect(lambda *a: ended.append(a))
    page.composer.setPlainText("What is the harbour pilot fee?")
    page.send()
    wait(until=lambda: ended, timeout_ms=600_000)
    view = page.transcript.view(ended[0][0])
    view.sources.open_list()
    wait(500)
    shot(window, "knowledge-chat")
    fireside.stop()


if __name__ == "__main__":
    main()

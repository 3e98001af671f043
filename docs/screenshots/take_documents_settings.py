"""Take docs/screenshots/settings-documents.png: Settings → Documents with a dedicated embedder chosen.

    xvfb-run -s "-screen 0 1280x800x24" python docs/screenshots/take_documents_settings.py [EMBEDDER.gguf]

The real app in a throwaway Fireside home. The embedder is the GGUF given (all-MiniLM-L6-v2 as
``bench/embedder_gguf.py`` makes it), or the tests' tiny random BERT when none is given; it is copied
into the models folder, so the library lists it beside the starter, and chosen through the bridge as
the Documents box chooses it.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
HOME = Path(tempfile.mkdtemp(prefix="fireside-shots-"))
os.environ["FIRESIDE_HOME"] = str(HOME)

from docs.screenshots.take import shot, start_app, wait  # noqa: E402
from fireside.engine.settings import Settings  # noqa: E402


def main() -> None:
    settings = Settings.from_env()
    settings.ensure_dirs()
    if len(sys.argv) > 1:
        model = "all-MiniLM-L6-v2"
        shutil.copy(sys.argv[1], settings.models_dir / f"{model}.gguf")
    else:
        from tests.helpers.bert_model import CLS, tiny_bert

        model = tiny_bert(settings.models_dir, CLS, name="tiny-bert")[0].stem
    _app, fireside, window = start_app()
    chosen = []
    fireside.ctx.bridge.embedder.choose(model, lambda m, e: chosen.append(e))
    wait(until=lambda: chosen, timeout_ms=30_000)
    window.show_page("Settings")
    page = window.pages["Settings"]
    box = page.documents
    wait(until=lambda: model in box.state.text(), timeout_ms=30_000)
    scroll = page.layout().itemAt(0).widget()
    wait(300)
    scroll.verticalScrollBar().setValue(box.geometry().top() - 300)  # Documents and what follows it in view
    shot(window, "settings-documents")
    fireside.stop()


if __name__ == "__main__":
    main()

"""Take the load dialog's screenshot (load-dialog.png) with drafting chosen, under Xvfb.

    xvfb-run -s "-screen 0 1280x800x24" python docs/screenshots/take_load_dialog.py

The library holds the starter and a tiny model with the starter's vocabulary (``tests/helpers``), offered
as its draft model; the dialog is in manual mode with prompt lookup on and that model as the draft.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from take import OUT, start_app, wait  # noqa: E402  (sets a throwaway FIRESIDE_HOME first)


def main() -> None:
    _app, fireside, window = start_app()
    from fireside.app.windows.load_dialog import LoadDialog
    from fireside.engine.library.library import Library
    from tests.helpers.models import smollm2_file
    from tests.helpers.vision_model import write_text_model

    folder = Path(tempfile.mkdtemp()) / "SmolDraft"
    folder.mkdir()
    tiny = write_text_model(folder / "SmolDraft-10M.gguf", smollm2_file())
    draft = Library(fireside.ctx.settings).add_file(tiny).id
    dialog = LoadDialog(fireside.ctx, "starter", window)
    dialog.auto.setChecked(False)
    dialog.show()
    wait(until=lambda: dialog.info is not None and dialog.draft.findText(draft) >= 0, timeout_ms=20_000)
    dialog.layers.setValue(0)
    dialog.lookup.setChecked(True)
    dialog.draft.setCurrentText(draft)
    wait(until=lambda: "draft model" in dialog.estimate.text(), timeout_ms=10_000)
    wait(300)
    dialog.grab().save(str(OUT / "load-dialog.png"))
    print("saved", OUT / "load-dialog.png")
    dialog.close()
    fireside.stop()


if __name__ == "__main__":
    main()

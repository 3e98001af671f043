"""Screenshots for issue 18: the chat with a long stats line and a branch switcher (chat-wrap.png, the
whole X screen at 1280x800, taken with ImageMagick's ``import``), and the tray/window icon
(tray-icon.png: Xvfb has no system tray, so the QIcon the tray and window use is drawn to a PNG).

    Xvfb :57 -screen 0 1280x800x24 &
    DISPLAY=:57 QT_QPA_PLATFORM=xcb python docs/screenshots/take_wrap_icon.py

The reply is the real SmolLM2 starter's, cut at 60 tokens (so the stats say "hit the token limit"),
then regenerated (so it has a ‹ 2/2 › switcher).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

OUT = Path(__file__).resolve().parent
os.environ["FIRESIDE_HOME"] = tempfile.mkdtemp(prefix="fireside-shots-")

from PySide6.QtCore import QTimer  # noqa: E402
from PySide6.QtGui import QColor, QFont, QImage, QPainter  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402


def icon_png(path: Path) -> None:
    from fireside.app.theme import app_icon

    icon = app_icon()
    img = QImage(760, 230, QImage.Format_ARGB32)
    img.fill(QColor("#f4f4f6"))
    p = QPainter(img)
    p.setFont(QFont("DejaVu Sans", 11))
    p.drawText(16, 26, "Fireside's tray and window icon: QIcon from resources/icons/fireside.svg (app.theme.app_icon),")
    p.drawText(16, 46, "rendered by Qt at tray sizes. Xvfb has no system tray, so this is the QIcon, drawn to a PNG.")
    x = 16
    for s in (16, 22, 24, 32, 48, 64, 128):
        p.drawPixmap(x, 170 - s, icon.pixmap(s, s))
        p.drawText(x, 195, f"{s}px")
        x += s + 28
    p.end()
    img.save(str(path))


def main() -> None:
    app = QApplication(sys.argv[:1])
    from fireside.app.main import Fireside

    fireside = Fireside()
    window = fireside.start()
    fireside.ctx.prefs.put("load_options", "starter", {"context": 2048})
    window.resize(1000, 760)  # as narrow as the window goes
    window.move(0, 0)
    window.show()
    page, ends = window.chat, []

    def on_ended(reply_id: int, _state: str) -> None:
        ends.append(reply_id)
        if len(ends) == 1:
            QTimer.singleShot(300, lambda: page.regenerate(reply_id))
        else:
            QTimer.singleShot(1500, shoot)

    def shoot() -> None:
        subprocess.run(["import", "-window", "root", str(OUT / "chat-wrap.png")], check=True)
        bar = page.transcript.horizontalScrollBar()
        print("horizontal scroll bar visible:", bar.isVisible(), "range:", bar.maximum())
        icon_png(OUT / "tray-icon.png")
        app.quit()

    page.settings_panel.max_tokens.setValue(60)
    page.composer.setPlainText("Tell me three things about foxes, with details.")
    page.reply_ended.connect(on_ended)
    QTimer.singleShot(500, page.send)
    app.exec()
    fireside.stop()


if __name__ == "__main__":
    main()

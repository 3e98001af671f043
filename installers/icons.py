"""Renders Fireside's one source icon (``resources/icons/fireside.svg``) into the files installers need:
PNGs in the hicolor theme sizes for Linux, a multi-size ``fireside.ico`` for Windows (through Pillow,
which PyInstaller needs for icons anyway), and the 256 px PNG PyInstaller turns into the macOS ``.icns``.

Runs at build time only, offscreen, with QtSvg from PySide6-Essentials; the app itself never loads the
SVG. Usage: ``python installers/icons.py OUT_DIR`` writes ``OUT_DIR/<size>/fireside.png`` and, where Pillow is installed, ``OUT_DIR/fireside.ico``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

SOURCE = Path(__file__).resolve().parent.parent / "resources" / "icons" / "fireside.svg"
# The sizes the hicolor theme lists as fixed directories (icon-theme spec, hicolor's index.theme).
HICOLOR_SIZES = (16, 22, 24, 32, 48, 64, 128, 256, 512)


def render(out_dir: Path, sizes: tuple[int, ...] = HICOLOR_SIZES) -> dict[int, Path]:
    """Write ``out_dir/<size>/fireside.png`` for each size and return the paths by size."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    app = QGuiApplication.instance() or QGuiApplication([])  # noqa: F841 (QPainter needs one)
    renderer = QSvgRenderer(str(SOURCE))
    if not renderer.isValid():
        raise SystemExit(f"icons: {SOURCE} is not a valid SVG")
    paths = {}
    for size in sizes:
        image = QImage(size, size, QImage.Format_ARGB32_Premultiplied)
        image.fill(Qt.transparent)
        painter = QPainter(image)
        painter.setRenderHint(QPainter.Antialiasing)
        renderer.render(painter)
        painter.end()
        path = out_dir / str(size) / "fireside.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        if not image.save(str(path)):
            raise SystemExit(f"icons: could not write {path}")
        paths[size] = path
    return paths


def write_ico(pngs: dict[int, Path], path: Path) -> Path:
    """One .ico holding the 16 to 256 px images, for the Windows executable and its installer."""
    from PIL import Image

    sizes = [s for s in sorted(pngs) if s <= 256]
    Image.open(pngs[max(sizes)]).save(path, format="ICO", sizes=[(s, s) for s in sizes])
    return path


if __name__ == "__main__":
    out = Path(sys.argv[1])
    pngs = render(out)
    for size, path in pngs.items():
        print(f"{size:4d} px  {path}")
    try:
        print(f" ico     {write_ico(pngs, out / 'fireside.ico')}")
    except ImportError:
        print(" ico     skipped: Pillow is not installed")

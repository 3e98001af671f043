"""Exporting a chat to a file: where to (a save dialog that offers the chat's title as the file's name),
and the writing, on the task pool.

``app/export.py`` makes the text, Markdown or JSON. A Markdown export links the chat's images in a folder
beside the file (``NAME-images/``), copied there as the file is saved; the save is atomic, so a crash
keeps the old file. A failure is shown in words.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QWidget

from .. import export
from ..context import AppContext
from ..feedback import show_error


def ask_path(parent: QWidget, title: str, kind: str) -> Path | None:
    """Where to export the chat called ``title`` as ``kind`` (``markdown`` or ``json``); None if cancelled."""
    suffix = ".md" if kind == "markdown" else ".json"
    name = title.replace("/", "-")[:60] + suffix
    path, _ = QFileDialog.getSaveFileName(parent, "Export chat", str(Path.home() / name))
    return Path(path) if path else None


def export_chat(ctx: AppContext, conv_id: int, kind: str, path: Path) -> None:
    """Write chat ``conv_id`` to ``path`` as ``kind``: the text is made here, the files are written on the
    task pool."""
    if kind == "markdown":
        folder = export.images_folder(path)
        text = export.to_markdown(ctx.store, conv_id, folder)
        images = [ctx.bridge.images.path(n) for n in export.image_names(ctx.store, conv_id)]
    else:
        text, images = export.to_json(ctx.store, conv_id), []
    ctx.tasks.run_in_background(lambda: export.save(path, text, images),  # atomic: a crash keeps the old file
                                lambda _r, e: e and show_error(e, f"exporting to {path}"))

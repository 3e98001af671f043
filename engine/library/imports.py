"""Find the models other apps already downloaded, and link them into the library without copying.

Each app keeps GGUF files its own way:

    lmstudio   ~/.lmstudio/models/PUBLISHER/REPO/FILE.gguf (older: ~/.cache/lm-studio/models)
    ollama     ~/.ollama/models/manifests/HOST/NAMESPACE/NAME/TAG (JSON) naming a layer of media type
               application/vnd.ollama.image.model, stored as ~/.ollama/models/blobs/sha256-HEX
    hf-cache   ~/.cache/huggingface/hub/models--PUBLISHER--REPO/snapshots/REVISION/FILE.gguf
    gpt4all    a flat folder of .gguf files ($XDG_DATA_HOME/nomic.ai/GPT4All on Linux, default
               ~/.local/share; ~/Library/Application Support on macOS; %LOCALAPPDATA% on Windows)
    jan        ~/jan/models/ID/*.gguf, or Jan's data folder's llamacpp/models/ID/model.gguf (the data
               folder is the one Jan's settings.json names, by default $XDG_DATA_HOME/Jan/data on Linux,
               %APPDATA%\\Jan\\data on Windows)

``find(app, locations)`` only reads; ``import_found(library, found)`` links each model in
(``Library.add_file``: a hard link, else a symlink). The other app's files are never moved or deleted.
Locations are parameters (``default_locations`` gives the usual ones, and ``settings.extra`` entries
named ``<app>_dir`` override them) so tests build each layout under a temporary folder.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import FiresideError
from ..models import SPLIT_RE, read_small
from ..settings import Settings
from .library import Library, LibraryModel
from .paths import check_part

log = logging.getLogger(__name__)

OLLAMA_MODEL_MEDIA = "application/vnd.ollama.image.model"
MAX_MANIFEST = 1024 * 1024


@dataclass(frozen=True)
class FoundModel:
    """A model another app keeps: where it is, and the name it will have in the library."""

    app: str
    path: Path
    publisher: str
    repo: str
    name: str


def default_locations(app: str, settings: Settings | None = None, home: Path | None = None,
                      environ: Mapping[str, str] | None = None) -> list[Path]:
    """The folders ``app`` usually keeps models in on this machine, found the way the app finds them:
    GPT4All's is Qt's app-local data folder and Jan's data folder sits in the platform's data folder,
    so on Linux both follow ``XDG_DATA_HOME`` (on Windows ``LOCALAPPDATA`` and ``APPDATA``); Ollama
    follows ``OLLAMA_MODELS``, the Hugging Face cache ``HF_HUB_CACHE``, ``HF_HOME`` and ``XDG_CACHE_HOME``."""
    if settings and settings.extra.get(f"{app}_dir"):
        return [Path(settings.extra[f"{app}_dir"]).expanduser()]
    home = home or Path.home()
    env = os.environ if environ is None else environ
    local, roaming = _env_dir(env, "LOCALAPPDATA"), _env_dir(env, "APPDATA")
    data = [_env_dir(env, "XDG_DATA_HOME") or home / ".local/share", home / "Library/Application Support",
            local or home / "AppData/Local", roaming or home / "AppData/Roaming"]
    if app == "jan":
        return [home / "jan/models"] + [f / "llamacpp/models" for f in _jan_data_folders(data, env, home)]
    hf_home = _env_dir(env, "HF_HOME") or (_env_dir(env, "XDG_CACHE_HOME") or home / ".cache") / "huggingface"
    return {
        "lmstudio": [home / ".lmstudio/models", home / ".cache/lm-studio/models"],
        "ollama": [_env_dir(env, "OLLAMA_MODELS") or home / ".ollama/models"],
        "hf-cache": [_env_dir(env, "HF_HUB_CACHE") or hf_home / "hub"],
        "gpt4all": [d / "nomic.ai/GPT4All" for d in data],
    }[app]


def _jan_data_folders(data: list[Path], env: Mapping[str, str], home: Path) -> list[Path]:
    """Jan's data folder: the one its ``settings.json`` names (Jan lets a user move it), else the
    default ``Jan/data`` in the platform's data folder. The settings live in Tauri's app data folder
    (``jan.ai.app``), or in ``~/.config/Jan`` on Linux for installs that started there."""
    config = _env_dir(env, "XDG_CONFIG_HOME") or home / ".config"
    named = []
    for path in [d / "jan.ai.app/settings.json" for d in data] + [config / "Jan/settings.json"]:
        try:
            folder = json.loads(read_small(path, MAX_MANIFEST).decode("utf-8")).get("data_folder")
        except (OSError, ValueError, AttributeError, FiresideError):
            continue  # no settings (the usual case), or unreadable: the default folder will do
        if isinstance(folder, str) and Path(folder).is_absolute():
            named.append(Path(folder))
    return list(dict.fromkeys(named + [d / "Jan/data" for d in data]))


def _env_dir(env: Mapping[str, str], name: str) -> Path | None:
    """An absolute folder named by the environment (the XDG spec ignores a relative one)."""
    value = env.get(name, "")
    return Path(value) if value and Path(value).is_absolute() else None


def _ggufs(folder: Path) -> Iterator[Path]:
    """GGUF files under ``folder`` (first parts only for split sets), no projectors, in order. Only
    regular files (``is_file`` follows links); ``Library.add_file`` opens each without blocking."""
    for path in sorted(folder.rglob("*.gguf")):
        m = SPLIT_RE.match(path.name)
        if "mmproj" in path.name.lower() or (m and int(m["no"]) != 1) or not path.is_file():
            continue
        yield path


def find_lmstudio(root: Path) -> list[FoundModel]:
    out = []
    for path in _ggufs(root):
        rel = path.relative_to(root).parts
        publisher, repo = (rel[0], rel[1]) if len(rel) >= 3 else ("lmstudio", path.parent.name or "models")
        out.append(FoundModel("lmstudio", path, publisher, repo, path.name))
    return out


def find_hf_cache(root: Path) -> list[FoundModel]:
    out = []
    for repo_dir in sorted(root.glob("models--*--*")):
        _, publisher, repo = repo_dir.name.split("--", 2)
        snapshot = _hf_snapshot(repo_dir)
        if snapshot is None:
            continue
        out += [FoundModel("hf-cache", p, publisher, repo, p.name) for p in _ggufs(snapshot)]
    return out


def _hf_snapshot(repo_dir: Path) -> Path | None:
    """The snapshot ``refs/main`` points at, else the newest one."""
    try:
        rev = read_small(repo_dir / "refs/main", 4096).decode("utf-8", errors="replace").strip()
    except FiresideError:
        rev = ""  # no ref (or a FIFO, a folder): the newest snapshot will do
    if rev and check_part_ok(rev) and (repo_dir / "snapshots" / rev).is_dir():
        return repo_dir / "snapshots" / rev
    snaps = sorted((repo_dir / "snapshots").glob("*"), key=lambda p: p.stat().st_mtime)
    return snaps[-1] if snaps else None


def find_ollama(root: Path) -> list[FoundModel]:
    out = []
    manifests = root / "manifests"
    for manifest in sorted(p for p in manifests.rglob("*") if p.is_file()):
        rel = manifest.relative_to(manifests).parts
        if len(rel) < 3:
            continue
        namespace, name, tag = rel[-3], rel[-2], rel[-1]
        blob = _ollama_blob(root, manifest)
        if blob is None:
            continue
        repo = name if namespace == "library" else f"{namespace}-{name}"
        out.append(FoundModel("ollama", blob, "ollama", repo, f"{tag}.gguf"))
    return out


def _ollama_blob(root: Path, manifest: Path) -> Path | None:
    try:
        layers = json.loads(read_small(manifest, MAX_MANIFEST).decode("utf-8")).get("layers", [])
        digest = next(la["digest"] for la in layers if la.get("mediaType") == OLLAMA_MODEL_MEDIA)
        algo, _, hexdigest = str(digest).partition(":")
        blob = root / "blobs" / check_part(f"{algo}-{hexdigest}", "blob name")
    except (OSError, ValueError, KeyError, TypeError, AttributeError, StopIteration, FiresideError) as exc:
        log.info("skipping Ollama manifest %s: %s", manifest, exc)
        return None
    return blob if blob.is_file() else None


def find_flat(app: str) -> Callable[[Path], list[FoundModel]]:
    """GPT4All and Jan: the repo is the file's folder (Jan) or its name (GPT4All)."""

    def finder(root: Path) -> list[FoundModel]:
        out = []
        for path in _ggufs(root):
            repo = path.parent.name if path.parent != root else path.stem
            out.append(FoundModel(app, path, app, repo, path.name))
        return out

    return finder


FINDERS: dict[str, Callable[[Path], list[FoundModel]]] = {
    "lmstudio": find_lmstudio,
    "ollama": find_ollama,
    "hf-cache": find_hf_cache,
    "gpt4all": find_flat("gpt4all"),
    "jan": find_flat("jan"),
}
APPS = tuple(FINDERS)


def find(app: str, locations: list[Path]) -> list[FoundModel]:
    """Every model ``app`` keeps under ``locations`` (folders that do not exist are skipped)."""
    out: list[FoundModel] = []
    for root in locations:
        if Path(root).is_dir():
            out += FINDERS[app](Path(root))
    return out


def import_found(library: Library, found: list[FoundModel]) -> list[tuple[FoundModel, LibraryModel | str]]:
    """Link each found model into the library; each result is the model or why it was skipped."""
    results: list[tuple[FoundModel, LibraryModel | str]] = []
    for f in found:
        try:
            results.append((f, library.add_file(f.path, publisher=f.publisher, repo=f.repo,
                                                name=f.name, app=f.app)))
        except (FiresideError, OSError) as exc:
            results.append((f, str(exc)))
    return results


def check_part_ok(name: str) -> bool:
    try:
        check_part(name)
    except FiresideError:
        return False
    return True

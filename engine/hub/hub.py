"""The Hugging Face hub as Fireside sees it: GGUF repos to search, their files by quantization, a fit
verdict per file from its real header, and pulls into the library.

``Hub(settings)`` talks to ``settings.hf_endpoint`` (a mirror works the same): ``huggingface_hub``'s
``HfApi`` for search and repo metadata (sizes and LFS SHA-256s), and one ``httpx.Client`` for Range
reads and downloads. Both are constructor seams. The token comes from the OS keyring and is only ever
sent to the endpoint's own origin. Repo ids and file names from the hub are checked before use.

Threading: every method blocks on the network; call them from a worker thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlsplit

import httpx
from huggingface_hub import HfApi
from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError
from huggingface_hub.hf_api import ModelInfo as ModelSummary
from huggingface_hub.utils import get_session, hf_raise_for_status

from ..errors import (
    GatedRepo,
    HardwareError,
    HubError,
    InvalidModelFile,
    ModelNotFound,
    ModelTooLarge,
    UnsafePath,
)
from ..fmt import human_bytes
from ..library import Library, LibraryModel, check_file_name, check_repo_id, quant_of
from ..models import SPLIT_RE, FitPlan, LoadOptions, ModelInfo, best, from_header, plan_fit
from ..models import hardware as hw
from ..settings import Settings, redact, secret
from .auth import HubAuth, get_token
from .downloads import Downloader, DownloadSpec, Progress, gated_message
from .header import CAP, PROBE, fetch_header, fetch_info

log = logging.getLogger(__name__)

SORTS = {"downloads": "downloads", "likes": "likes", "recent": "last_modified", "trending": "trending_score"}
API_SORTS = {"downloads": "downloads", "likes": "likes", "recent": "lastModified", "trending": "trendingScore"}
MIN_USEFUL_CONTEXT = 2048  # a model that fits only below this is refused by the pull's fit gate
MAX_PROJECTORS = 12  # projector headers read to choose one (repos ship a few: f16, q8_0, bf16)
PREFERRED = ("Q4_K_M", "Q4_K_S", "Q4_0", "Q4_1", "Q5_K_M", "Q8_0")
_KEYRING = object()


@dataclass
class RepoSummary:
    id: str
    author: str | None
    downloads: int
    likes: int
    last_modified: str | None
    gated: bool | str
    tags: list[str] = field(default_factory=list)


@dataclass
class HubFile:
    """One model on the hub: a single GGUF file, or every part of a split set."""

    name: str  # the first part's path in the repo
    quant: str
    parts: list[str]
    sizes: list[int]
    sha256s: list[str | None]

    @property
    def size(self) -> int:
        return sum(self.sizes)


@dataclass
class RepoDetails:
    id: str
    author: str | None
    revision: str | None
    gated: bool | str
    license: str | None
    summary: str | None
    downloads: int
    likes: int
    files: list[HubFile]
    projectors: list[HubFile]

    def quants(self) -> dict[str, list[HubFile]]:
        out: dict[str, list[HubFile]] = {}
        for f in self.files:
            out.setdefault(f.quant, []).append(f)
        return out


@dataclass
class FitCheck:
    """A hub file's fit on this machine, from its real header."""

    file: HubFile
    info: ModelInfo
    plan: FitPlan


class Hub:
    """Search, inspect and pull GGUF models. ``client`` and ``api`` are the I/O seams."""

    def __init__(self, settings: Settings, client: httpx.Client | None = None, api: HfApi | None = None,
                 token: object = _KEYRING, library: Library | None = None,
                 downloader: Downloader | None = None, probe: int = PROBE, cap: int = CAP):
        self.settings = settings
        self.endpoint = settings.hf_endpoint.rstrip("/")
        self.token: str | None = secret((get_token() or settings.hf_token) if token is _KEYRING else token)  # type: ignore[arg-type]
        self.auth = HubAuth(self.token, self.endpoint)
        self.client = client or httpx.Client(follow_redirects=True, timeout=httpx.Timeout(30.0, connect=15.0))
        self.api = api or HfApi(endpoint=self.endpoint, token=self.token or False)
        self._library = library
        self.downloader = downloader or Downloader(self.client, auth=self.auth)
        self.probe, self.cap = probe, cap

    def __repr__(self) -> str:
        return f"Hub(endpoint={self.endpoint!r}, token={redact(self.token)!r})"

    @property
    def library(self) -> Library:
        if self._library is None:
            self._library = Library(self.settings)
        return self._library

    def search(self, query: str = "", author: str | None = None, sort: str = "downloads",
               limit: int = 20) -> list[RepoSummary]:
        """GGUF repos matching ``query``, most downloaded (or liked, or recent) first."""
        params = {"filter": "gguf", "sort": API_SORTS.get(sort, sort), "limit": limit}
        params |= {k: v for k, v in (("search", query), ("author", author)) if v}

        def fetch() -> list[ModelSummary]:
            # One request, as ``HfApi.list_models`` makes for one page, without its backoff: that retries a
            # refused connection five times over 25 s, and a search with no network should say so at once.
            r = get_session().get(f"{self.endpoint}/api/models", params=params,
                                  headers=self.api._build_hf_headers(token=self.token or False))
            hf_raise_for_status(r)
            return [ModelSummary(**{"siblings": None, **item}) for item in r.json()[:limit]]

        items = self._call("search", fetch)
        return [RepoSummary(m.id, m.author, m.downloads or 0, m.likes or 0,
                            m.last_modified.isoformat() if m.last_modified else None, m.gated or False,
                            list(m.tags or [])) for m in items]

    def repo(self, repo_id: str) -> RepoDetails:
        """A repo's details and its GGUF files grouped into models (split sets joined)."""
        check_repo_id(repo_id)
        m = self._call(repo_id, lambda: self.api.model_info(repo_id, files_metadata=True,
                                                            token=self.token or False))
        card = m.card_data.to_dict() if m.card_data else {}
        files = _group_files(m.siblings or [])
        return RepoDetails(
            id=m.id, author=m.author, revision=m.sha, gated=m.gated or False,
            license=card.get("license") or _tag_value(m.tags, "license"),
            summary=card.get("base_model") and f"based on {card['base_model']}" or m.pipeline_tag,
            downloads=m.downloads or 0, likes=m.likes or 0,
            files=[f for f in files if "mmproj" not in f.name.lower()],
            projectors=[f for f in files if "mmproj" in f.name.lower()])

    def pick(self, details: RepoDetails, selector: str | None = None) -> HubFile:
        """The file ``selector`` names: a quantization (``Q4_K_M``) or a file name; by default a
        Q4 that balances size and quality, else the smallest."""
        if not details.files:
            raise ModelNotFound(f"{details.id} has no GGUF files")
        if selector is None:
            by_quant = {f.quant: f for f in sorted(details.files, key=lambda f: f.size, reverse=True)}
            return next((by_quant[q] for q in PREFERRED if q in by_quant),
                        min(details.files, key=lambda f: f.size))
        if "/" in selector or selector.lower().endswith(".gguf"):
            name = selector.strip("/")
            check_file_name(name)
            hits = [f for f in details.files if name in (f.name, f.name.split("/")[-1]) or name in f.parts]
        else:
            hits = sorted((f for f in details.files if f.quant.lower() == selector.lower()), key=lambda f: f.size)
        if not hits:
            have = ", ".join(sorted(details.quants())) or "none"
            raise ModelNotFound(f"{details.id} has no file matching {selector!r} (quantizations: {have})")
        return hits[0]

    def url(self, repo_id: str, filename: str, revision: str | None = "main") -> str:
        check_repo_id(repo_id)
        check_file_name(filename)
        return f"{self.endpoint}/{repo_id}/resolve/{quote(revision or 'main', safe='')}/{quote(filename)}"

    def header_info(self, repo_id: str, file: HubFile, revision: str | None = None) -> ModelInfo:
        """The file's ``ModelInfo`` from its headers, fetched with Range requests (no download)."""
        urls = [self.url(repo_id, p, revision) for p in file.parts]
        return fetch_info(self.client, urls, file.parts, file.size, self.auth, self.probe, self.cap)

    def fit(self, repo_id: str, file: HubFile, options: LoadOptions | None = None,
            hardware: hw.Hardware | None = None, revision: str | None = None) -> FitCheck:
        info = self.header_info(repo_id, file, revision)
        return FitCheck(file, info, plan_fit(info, hardware or hw.detect(), options))

    def pull(self, repo_id: str, selector: str | None = None,
             on_progress: Callable[[Progress], None] | None = None,
             cancel: threading.Event | None = None, force: bool = False) -> LibraryModel:
        """Download a model (every part, and the repo's projector) into the library, verified.
        Resumes a part left by an earlier pull. Refuses (``ModelTooLarge``) a model that cannot run on
        this machine even at a short context, unless ``force``. Blocks; run on a worker thread."""
        details = self.repo(repo_id)
        file = self.pick(details, selector)
        wanted = [file, *self._projector(details, file)]
        specs = [self._spec(details, f, i) for f in wanted for i in range(len(f.parts))]
        self.downloader.check_space(specs)
        if not force and not all(s.dest.is_file() for s in specs):
            self._refuse_unfit(details, file)
        for spec in specs:
            self.downloader.download(spec, on_progress, cancel)
        first = specs[0]
        self.library.record(first.dest, "hub", f"{repo_id}@{details.revision or 'main'}/{file.name}",
                            first.sha256)
        return self.library.by_path(first.dest)

    def _projector(self, details: RepoDetails, file: HubFile) -> list[HubFile]:
        """The repo's vision projector for ``file``, chosen by header facts read with Range requests
        (``models/projector.py``): one whose output is the model's width, F16 before Q8_0 before the
        rest. None fits (or the headers cannot be read): no projector, rather than a wrong one."""
        if not details.projectors:
            return []
        try:
            n_embd = self.header_info(details.id, file, details.revision).embedding_length
            infos = {}
            for p in details.projectors[:MAX_PROJECTORS]:
                header = fetch_header(self.client, self.url(details.id, p.name, details.revision), p.name, self.auth,
                                      self.probe, self.cap)
                infos[p.name] = from_header(Path(p.name), header, p.size)
        except (HubError, InvalidModelFile) as exc:
            log.warning("could not read the projectors of %s (%s); pulling the model without one", details.id, exc)
            return []
        chosen = best(list(infos.values()), n_embd)
        return [p for p in details.projectors if chosen and p.name == str(chosen.path)]

    def _refuse_unfit(self, details: RepoDetails, file: HubFile) -> None:
        """The fit gate of a pull: the same verdict Discover and ``files --fit`` show, from the header."""
        try:
            check = self.fit(details.id, file, revision=details.revision)
        except (HubError, InvalidModelFile, HardwareError) as exc:  # no verdict is no reason to refuse
            log.warning("could not check whether %s fits on this machine (%s); pulling it", file.name, exc)
            return
        reason = unfit_reason(check)
        if reason:
            raise ModelTooLarge(f"{reason}. To download it anyway, pull it with `fireside pull --force`")

    def _spec(self, details: RepoDetails, file: HubFile, i: int) -> DownloadSpec:
        name = file.parts[i]
        return DownloadSpec(repo_id=details.id, filename=name, url=self.url(details.id, name, details.revision),
                            dest=self.library.destination(details.id, name), size=file.sizes[i],
                            sha256=file.sha256s[i], revision=details.revision or "main")

    def _call(self, what: str, fn: Callable):
        try:
            return fn()
        except GatedRepoError as exc:
            raise GatedRepo(gated_message(what)) from exc
        except RepositoryNotFoundError as exc:
            raise HubError(f"{what} is not on the hub (or is private)") from exc
        except HfHubHTTPError as exc:
            # Not the library's text: it is httpx's, with a link to MDN, written for developers.
            code = getattr(exc.response, "status_code", None)
            if code == 404:
                raise HubError(f"no such repo or file on the hub: {what}") from exc
            raise HubError(f"the hub refused {what} ({code or 'no answer'}): {_server_message(exc)}") from exc
        except Exception as exc:
            # huggingface_hub's transport (httpx, httpx2 or requests, by version) raises its own
            # connection errors; turn only those into HubError.
            if type(exc).__module__.split(".")[0] in ("httpx", "httpx2", "requests", "urllib3"):
                log.info("the hub at %s did not answer %s: %r", self.endpoint, what, exc)
                raise HubError(unreachable_message(self.endpoint, exc)) from exc
            raise


def unreachable_message(endpoint: str, exc: BaseException) -> str:
    """Why the hub did not answer, for a person: offline (no name lookup, no route, refused) or too slow,
    without the socket's errno text (the log keeps it)."""
    text = f"{type(exc).__name__} {exc}".lower()
    host = urlsplit(endpoint).netloc or endpoint
    if "timeout" in text or "timed out" in text:
        return (f"cannot reach the hub at {endpoint}: it took too long to answer (a slow or broken connection?); "
                "try again in a moment")
    if any(s in text for s in ("name or service not known", "temporary failure in name resolution",
                               "nodename nor servname", "getaddrinfo failed", "no address associated")):
        why = f"{host}'s address could not be looked up"
    elif "refused" in text:
        why = f"{host} refused the connection"
    else:
        why = f"{host} did not answer"
    return f"cannot reach the hub at {endpoint}: you seem to be offline ({why}); check the network connection, then try again"


def unfit_reason(check: FitCheck) -> str | None:
    """Why ``check``'s file cannot run on this machine at any useful context, or None if it can.
    A model that fits only below the default context still passes: it loads with a smaller one."""
    plan = check.plan
    if plan.fits or plan.max_context >= MIN_USEFUL_CONTEXT:
        return None
    return (f"{check.file.name} ({human_bytes(check.file.size)}) will not fit on this machine: it needs about "
            f"{human_bytes(plan.shortfall_bytes)} more memory than is free at a {plan.context:,}-token context, and no "
            f"context of {MIN_USEFUL_CONTEXT:,} tokens or more fits")


def _group_files(siblings: list) -> list[HubFile]:
    """GGUF siblings as models: a split set's parts join under its first part; unsafe names are skipped."""
    singles: list[HubFile] = []
    sets: dict[str, list] = {}
    for s in siblings:
        name = s.rfilename
        if not name.lower().endswith(".gguf"):
            continue
        try:
            check_file_name(name)
        except UnsafePath as exc:
            log.warning("ignoring a hub file with an unsafe name: %s", exc)
            continue
        m = SPLIT_RE.match(name.split("/")[-1])
        if m:
            sets.setdefault(name[: len(name) - len(m.group(0))] + m["stem"], []).append((int(m["no"]), s))
        else:
            singles.append(_hub_file([s], name))
    for parts in sets.values():
        parts.sort(key=lambda p: p[0])
        count = int(SPLIT_RE.match(parts[0][1].rfilename.split("/")[-1])["count"])
        if [n for n, _ in parts] == list(range(1, count + 1)):  # an incomplete set is not offered
            singles.append(_hub_file([s for _, s in parts], parts[0][1].rfilename))
    return sorted(singles, key=lambda f: f.name)


def _hub_file(siblings: list, name: str) -> HubFile:
    stem = name.split("/")[-1][: -len(".gguf")]
    m = SPLIT_RE.match(name.split("/")[-1])
    quant = quant_of(m["stem"] if m else stem) or "other"
    return HubFile(name=name, quant=quant, parts=[s.rfilename for s in siblings],
                   sizes=[(s.lfs.size if s.lfs else s.size) or 0 for s in siblings],
                   sha256s=[s.lfs.sha256 if s.lfs else None for s in siblings])


def _server_message(exc: HfHubHTTPError) -> str:
    """The hub's own one-line reason (``server_message``, else the JSON ``error``), not httpx's text."""
    msg = (getattr(exc, "server_message", None) or "").strip()
    if not msg:
        try:
            msg = str(exc.response.json().get("error", ""))
        except Exception:  # not JSON, or no response at all
            msg = ""
    return msg.splitlines()[0][:200] if msg else "no reason given"


def _tag_value(tags: list[str] | None, key: str) -> str | None:
    return next((t.split(":", 1)[1] for t in tags or [] if t.startswith(f"{key}:")), None)

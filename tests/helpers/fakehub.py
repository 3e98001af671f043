"""A local stand-in for the Hugging Face hub: enough of its API for ``huggingface_hub`` and Fireside's
downloader, serving real GGUF bytes from 127.0.0.1 on random ports.

Two servers share one state, as on the real hub: the *hub* answers ``/api/models`` (search),
``/api/models/{repo}`` (details with sizes and LFS SHA-256s), ``/api/models/{repo}/tree/main`` and
``/{repo}/resolve/{rev}/{file}`` (a 302 with ``X-Linked-Etag``/``X-Linked-Size``, like the hub), and a
*CDN* on another port serves the bytes with Range. Every request is recorded. ``Fault`` makes the CDN
misbehave for a file: drop the connection after N bytes, stall, pause until released, ignore Range,
or flip a byte; ``bare_404`` answers unknown repos with a 404 that carries no hub error code. A gated repo answers 401 with ``X-Error-Code: GatedRepo`` unless given its token.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, unquote, urlsplit


@dataclass
class Fault:
    drop_after: int | None = None  # close the connection after this many body bytes
    stall_after: int | None = None  # send this many bytes, then go silent (until the hub closes)
    pause_after: int | None = None  # send this many bytes, set ``reached``, wait for ``release``
    ignore_range: bool = False  # answer 200 with the whole file even when asked for a range
    flip_byte: int | None = None  # serve this byte XOR 0xFF
    times: int = 1  # how many requests the connection faults apply to
    reached: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)


@dataclass
class Seen:
    server: str
    method: str
    path: str
    headers: dict[str, str]


@dataclass
class FakeRepo:
    id: str
    files: dict[str, bytes]
    gated: bool = False
    token: str | None = None
    sha: str = "0123456789abcdef0123456789abcdef01234567"
    downloads: int = 100
    likes: int = 10
    listed_only: list[str] = field(default_factory=list)  # names listed with no bytes (hostile names)


class FakeHub:
    """Start with ``with FakeHub() as hub:``; ``hub.url`` is the endpoint to give Fireside."""

    def __init__(self):
        self.repos: dict[str, FakeRepo] = {}
        self.faults: dict[str, Fault] = {}
        self.seen: list[Seen] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.bare_404 = False  # answer an unknown repo with a plain 404, as a mirror or proxy may
        self.hub = self._serve("hub")
        self.cdn = self._serve("cdn")
        self.url = f"http://127.0.0.1:{self.hub.server_address[1]}"
        self.cdn_url = f"http://127.0.0.1:{self.cdn.server_address[1]}"

    def _serve(self, role: str) -> ThreadingHTTPServer:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.daemon_threads = True
        server.fake, server.role = self, role  # type: ignore[attr-defined]
        threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
        return server

    def add_repo(self, repo_id: str, files: dict[str, bytes], **kw) -> FakeRepo:
        repo = FakeRepo(repo_id, files, **kw)
        self.repos[repo_id] = repo
        return repo

    def ranges(self, name: str) -> list[str | None]:
        """The Range header of every CDN request for file ``name``, in order."""
        return [s.headers.get("range") for s in self.seen if s.server == "cdn" and s.path.endswith("/" + name)]

    def downloads(self, name: str) -> list[str | None]:
        """The Range header of every CDN download of ``name`` (header probes, ``bytes=a-b``, left out)."""
        return [r for r in self.ranges(name) if not _is_probe(r)]

    def close(self) -> None:
        self.stopping.set()
        for f in self.faults.values():
            f.release.set()
        for server in (self.hub, self.cdn):
            server.shutdown()
            server.server_close()

    def __enter__(self) -> FakeHub:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _sibling(name: str, data: bytes | None) -> dict:
    if data is None:
        return {"rfilename": name, "size": 1, "lfs": {"size": 1, "sha256": "0" * 64, "pointerSize": 130}}
    sha = hashlib.sha256(data).hexdigest()
    return {"rfilename": name, "size": len(data), "blobId": sha[:40],
            "lfs": {"size": len(data), "sha256": sha, "pointerSize": 134}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # keep pytest output clean
        pass

    @property
    def fake(self) -> FakeHub:
        return self.server.fake  # type: ignore[attr-defined]

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        path = unquote(url.path)
        with self.fake.lock:
            self.fake.seen.append(Seen(self.server.role, self.command, path,  # type: ignore[attr-defined]
                                       {k.lower(): v for k, v in self.headers.items()}))
        if self.server.role == "cdn":  # type: ignore[attr-defined]
            return self._blob(path, parse_qs(url.query))
        if path == "/api/models":
            return self._search(parse_qs(url.query))
        if path.startswith("/api/models/"):
            return self._api(path.removeprefix("/api/models/"))
        if "/resolve/" in path:
            return self._resolve(path)
        self._json({"error": "not found"}, 404)

    def _json(self, obj: object, code: int = 200, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _summary(self, repo: FakeRepo) -> dict:
        return {"id": repo.id, "modelId": repo.id, "author": repo.id.split("/")[0], "downloads": repo.downloads,
                "likes": repo.likes, "gated": "manual" if repo.gated else False, "private": False,
                "tags": ["gguf", "license:apache-2.0"], "lastModified": "2025-01-01T00:00:00.000Z",
                "sha": repo.sha}

    def _search(self, q: dict[str, list[str]]) -> None:
        text = q.get("search", [""])[0].lower()
        author = q.get("author", [None])[0]
        hits = [self._summary(r) for r in self.fake.repos.values()
                if text in r.id.lower() and (author is None or r.id.startswith(author + "/"))]
        hits.sort(key=lambda h: -h["downloads"])
        limit = int(q.get("limit", ["1000"])[0])
        self._json(hits[:limit])

    def _api(self, rest: str) -> None:
        parts = rest.split("/")
        repo = self.fake.repos.get("/".join(parts[:2]))
        if repo is None:
            if self.fake.bare_404:
                return self._json({"error": "Not Found"}, 404)
            return self._json({"error": "Repository not found"}, 404, {"X-Error-Code": "RepoNotFound"})
        siblings = [_sibling(n, d) for n, d in repo.files.items()] + [_sibling(n, None) for n in repo.listed_only]
        if len(parts) > 2 and parts[2] == "tree":
            return self._json([{"type": "file", "path": s["rfilename"], "size": s["size"], "oid": s.get("blobId"),
                                "lfs": {"oid": s["lfs"]["sha256"], "size": s["size"], "pointerSize": 134}}
                               for s in siblings])
        info = self._summary(repo) | {"siblings": siblings, "cardData": {"license": "apache-2.0"}}
        self._json(info)

    def _resolve(self, path: str) -> None:
        repo_id, _, rest = path.lstrip("/").partition("/resolve/")
        rev, _, name = rest.partition("/")
        repo = self.fake.repos.get(repo_id)
        if repo is None or name not in repo.files:
            return self._json({"error": "Entry not found"}, 404, {"X-Error-Code": "EntryNotFound"})
        if repo.gated and self.headers.get("Authorization") != f"Bearer {repo.token}":
            return self._json({"error": f"Access to model {repo_id} is restricted and you are not in the "
                                        f"authorized list. Visit https://hub/{repo_id} to ask for access."},
                              401, {"X-Error-Code": "GatedRepo"})
        data = repo.files[name]
        sha = hashlib.sha256(data).hexdigest()
        self.send_response(302)
        self.send_header("Location", f"{self.fake.cdn_url}/blobs/{sha}/{quote(name)}?repo={quote(repo_id)}")
        self.send_header("X-Linked-Etag", f'"{sha}"')
        self.send_header("X-Linked-Size", str(len(data)))
        self.send_header("ETag", f'"{sha[:40]}"')
        self.send_header("X-Repo-Commit", repo.sha)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _blob(self, path: str, q: dict[str, list[str]]) -> None:
        repo = self.fake.repos.get(q.get("repo", [""])[0])
        name = path.split("/", 3)[-1]
        if repo is None or name not in repo.files:
            return self._json({"error": "no such blob"}, 404)
        data = repo.files[name]
        # Faults hit downloads (no Range, or an open-ended one), not the fit check's header probes.
        fault = None if _is_probe(self.headers.get("Range")) else self.fake.faults.get(name)
        if fault and fault.flip_byte is not None:
            data = data[:fault.flip_byte] + bytes([data[fault.flip_byte] ^ 0xFF]) + data[fault.flip_byte + 1:]
        start, end = _range(self.headers.get("Range"), len(data))
        if fault and fault.ignore_range:
            start, end = None, None
        if start is not None and start >= len(data):
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{len(data)}")
            self.send_header("Content-Length", "0")
            return self.end_headers()
        self._send_bytes(data, start, end, self._take_fault(fault))

    def _take_fault(self, fault: Fault | None) -> Fault | None:
        with self.fake.lock:
            if fault is None or fault.times <= 0:
                return None
            fault.times -= 1
            return fault

    def _send_bytes(self, data: bytes, start: int | None, end: int | None, fault: Fault | None) -> None:
        body = data if start is None else data[start:end + 1]
        self.send_response(200 if start is None else 206)
        if start is not None:
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
        # it closes the connection after the bytes (below), so it says so, as a real server does: a client
        # that took the connection as kept alive could send its next request into the closing socket
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command == "HEAD":
            return
        cut = _cut(fault, len(body))
        try:
            for i in range(0, cut, 64 * 1024):
                self.wfile.write(body[i:min(cut, i + 64 * 1024)])
            self.wfile.flush()
            if cut < len(body):
                self._misbehave(fault)
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True

    def _misbehave(self, fault: Fault) -> None:
        if fault.pause_after is not None:
            fault.reached.set()
            fault.release.wait(30)
        elif fault.stall_after is not None:
            self.fake.stopping.wait(30)
        # drop_after: return without the rest; the connection closes short of Content-Length


def _cut(fault: Fault | None, n: int) -> int:
    if fault is None:
        return n
    for limit in (fault.drop_after, fault.stall_after, fault.pause_after):
        if limit is not None:
            return min(n, limit)
    return n


def _is_probe(header: str | None) -> bool:
    return bool(header) and not header.endswith("-")


def _range(header: str | None, size: int) -> tuple[int | None, int | None]:
    if not header or not header.startswith("bytes="):
        return None, None
    first, _, last = header.removeprefix("bytes=").partition("-")
    start = int(first)
    end = min(size - 1, int(last)) if last else size - 1
    return start, end

"""``fireside search|files|pull|ls|rm|import|login``: the model library and the Hugging Face hub."""

from __future__ import annotations

import argparse
import getpass
import sys
import threading

from ..errors import UnsafePath
from ..fmt import human_bytes, human_count
from ..hub import SORTS, Hub, Progress, delete_token, set_token
from ..library import Library, LibraryModel, check_repo_id, imports, model_id
from ..models import hardware, verdict_text
from ..settings import Settings
from .fmt import print_json, table


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("search", help="search GGUF models on the Hugging Face hub")
    p.add_argument("query", nargs="?", default="")
    p.add_argument("--author")
    p.add_argument("--sort", choices=sorted(SORTS), default="downloads")
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_search)

    p = sub.add_parser("files", help="a hub repo's GGUF files by quantization, with their fit here")
    p.add_argument("repo", help="publisher/repo")
    p.add_argument("--fit", action="store_true", help="read each file's header (Range) and plan its fit")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_files)

    p = sub.add_parser("pull", help="download a model into the library (resumes, verifies SHA-256)")
    p.add_argument("ref", help="publisher/repo, publisher/repo:QUANT or publisher/repo/FILE.gguf")
    p.add_argument("--force", "--yes", "-y", dest="force", action="store_true",
                   help="pull even a model that cannot fit on this machine")
    p.set_defaults(handler=cmd_pull)

    p = sub.add_parser("ls", help="list the models in the library")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_ls)

    p = sub.add_parser("rm", help="remove a model from the library (an import's original stays)")
    p.add_argument("model", help="a library id or alias")
    p.set_defaults(handler=cmd_rm)

    p = sub.add_parser("import", help="link GGUF files, or another app's models, into the library")
    p.add_argument("path", nargs="?", help="a .gguf file to import in place")
    p.add_argument("--from", dest="app", choices=imports.APPS, help="import what this app downloaded")
    p.add_argument("--dir", action="append", help="where the app keeps its models (default: its usual place)")
    p.add_argument("--dry-run", action="store_true", help="only show what would be imported")
    p.set_defaults(handler=cmd_import)

    p = sub.add_parser("login", help="save a Hugging Face access token in the OS keyring")
    p.add_argument("--logout", action="store_true", help="forget the saved token")
    p.set_defaults(handler=cmd_login)


def parse_ref(ref: str) -> tuple[str, str | None]:
    """``pub/repo:Q4_K_M`` -> (``pub/repo``, ``Q4_K_M``); ``pub/repo/f.gguf`` -> (``pub/repo``, ``f.gguf``)."""
    head, _, quant = ref.partition(":")
    parts = head.split("/")
    if len(parts) < 2:
        raise UnsafePath(f"{ref!r} is not publisher/repo[:QUANT or /FILE]")
    repo_id = "/".join(parts[:2])
    check_repo_id(repo_id)
    if len(parts) > 2:
        return repo_id, "/".join(parts[2:])
    return repo_id, quant or None


def cmd_search(args: argparse.Namespace) -> int:
    hits = Hub(Settings.from_env()).search(args.query, author=args.author, sort=args.sort, limit=args.limit)
    if args.json:
        print_json([vars(h) for h in hits])
        return 0
    rows = [[h.id, human_count(h.downloads), str(h.likes), "gated" if h.gated else ""] for h in hits]
    print(table(rows, ["repo", "downloads", "likes", ""]) if rows else "no GGUF repos found")
    return 0


def cmd_files(args: argparse.Namespace) -> int:
    hub = Hub(Settings.from_env())
    details = hub.repo(args.repo)
    hw = hardware.detect() if args.fit else None
    rows, out = [], []
    for f in details.files:
        verdict = hub.fit(details.id, f, hardware=hw, revision=details.revision).plan.verdict if hw else ""
        rows.append([f.quant, f.name, human_bytes(f.size), verdict_text(verdict) if verdict else ""])
        out.append({"quant": f.quant, "name": f.name, "size": f.size, "parts": f.parts, "fit": verdict})
    if args.json:
        print_json({"id": details.id, "license": details.license, "gated": details.gated, "files": out})
        return 0
    print(f"{details.id}  license: {details.license or '?'}" + ("  (gated)" if details.gated else ""))
    print(table(rows, ["quant", "file", "size", "fit" if hw else ""]))
    return 0


class ProgressBar:
    """A one-line progress bar on stderr, redrawn on each sampled update."""

    def __init__(self, stream=None):
        self._stream = stream

    @property
    def stream(self):
        return self._stream or sys.stderr  # looked up late: tests and the app swap sys.stderr

    def __call__(self, p: Progress) -> None:
        if p.state == "waiting":
            self.stream.write(f"{p.filename}: another pull of this file is running; waiting for it\n")
            self.stream.flush()
            return
        frac = p.done / p.total if p.total else 1.0
        eta = f"{int(p.eta_s) // 60}:{int(p.eta_s) % 60:02d}" if p.eta_s is not None else "--:--"
        bar = "#" * int(30 * frac)
        self.stream.write(f"\r{p.filename[-32:]:<32} [{bar:<30}] {100 * frac:5.1f}% "
                          f"{human_bytes(p.done)}/{human_bytes(p.total)} {human_bytes(p.speed)}/s "
                          f"ETA {eta} {p.state:<11}")
        if p.state == "done":
            self.stream.write("\n")
        self.stream.flush()


def cmd_pull(args: argparse.Namespace) -> int:
    repo_id, selector = parse_ref(args.ref)
    cancel = threading.Event()
    model = Hub(Settings.from_env()).pull(repo_id, selector, on_progress=ProgressBar(), cancel=cancel,
                                          force=args.force)
    print(f"pulled {model.id}" + (f"  (alias {model.aliases[0]})" if model.aliases else ""))
    return 0


def cmd_ls(args: argparse.Namespace) -> int:
    scan = Library(Settings.from_env()).scan()
    models = scan.models
    if args.json:
        print_json([m.to_dict() for m in models])
    else:
        rows = [[m.id, ", ".join(m.aliases), m.quant, human_bytes(m.size + _projector_size(m)), m.source,
                 _reads(m)] for m in models]
        print(table(rows, ["id", "alias", "quant", "size", "source", "reads"]) if rows else "the library is empty")
    for b in scan.broken:  # on stderr, so the listing (and its JSON) stays what scripts expect
        print(f"not listed: {b.path}: {b.reason}", file=sys.stderr)
    return 0


def _reads(m: LibraryModel) -> str:
    return "embeds" if m.info.embeds_only else "vision" if m.projector else "text"


def _projector_size(m: LibraryModel) -> int:
    try:
        return m.projector.stat().st_size if m.projector else 0
    except OSError:
        return 0


def cmd_rm(args: argparse.Namespace) -> int:
    model = Library(Settings.from_env()).remove(args.model)
    what = "unlinked (the original file stays where it was)" if model.source == "import" else "deleted"
    print(f"{model.id}: {what}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    library = Library(settings)
    if args.path:
        _print_imported([(args.path, library.add_file(args.path))])
        return 0
    if not args.app:
        print("fireside import: give a PATH or --from APP", file=sys.stderr)
        return 2
    dirs = args.dir or imports.default_locations(args.app, settings)
    found = imports.find(args.app, dirs)
    if not found:
        print(f"no {args.app} models found in {', '.join(map(str, dirs))}")
        return 0
    if args.dry_run:
        print(table([[str(f.path), model_id(f"{f.publisher}/{f.repo}/{f.name}")] for f in found], ["found", "would be"]))
        return 0
    _print_imported([(str(f.path), r) for f, r in imports.import_found(library, found)])
    return 0


def _print_imported(results: list[tuple[str, LibraryModel | str]]) -> None:
    for src, result in results:
        if isinstance(result, LibraryModel):
            alias = f"  (alias {result.aliases[0]})" if result.aliases else ""
            print(f"imported {result.id}{alias}  <- {src}  ({result.info.architecture}, {result.quant}, "
                  f"{human_bytes(result.size)})")
        else:
            print(f"skipped {src}: {result}", file=sys.stderr)


def cmd_login(args: argparse.Namespace) -> int:
    if args.logout:
        delete_token()
        print("the Hugging Face token is forgotten")
        return 0
    set_token(getpass.getpass("Hugging Face access token: ") if sys.stdin.isatty() else sys.stdin.readline())
    print("token saved in the OS keyring; it is sent only to the hub")
    return 0

"""Vision projectors (``mmproj`` GGUFs): what their headers say, and which one belongs to a model.

A vision model comes as two files, the text model and a projector that turns images into embeddings
the text model reads. Repos hold several of each (quantizations), and sometimes projectors for other
sizes of the family, so a projector is paired with a model by header facts, not by file name alone:
it must have a vision encoder (``clip.has_vision_encoder``, a ``clip.*projector_type``) and its output
embedding size must be the text model's ``embedding_length``. llama.cpp computes that size from the
projector's last tensor, whose name depends on the projector type, so every ``mm.*`` tensor's
dimensions and ``clip.vision.projection_dim`` are the candidates: a projector none of whose
candidates is the model's width is never offered (llama.cpp would refuse the pair at load). Among the
projectors that fit, F16 comes first, then Q8_0, then the rest (quantizing a projector costs more
quality than its size saves, and F16 is what hubs ship as the default).

Threading: plain functions over files, callable from any thread; ``read_projector`` is cached by
path, size and modification time.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from ..errors import FiresideError
from .files import not_regular, open_regular
from .header import Header, parse

PREFERRED = ("F16", "Q8_0", "BF16", "F32")  # file types, best first (then anything else)
HEADER_READ = 8 * 1024 * 1024  # a projector's header (no vocabulary) is tens of KB


@dataclass(frozen=True)
class ProjectorInfo:
    path: Path
    projector_type: str
    output_widths: frozenset[int]  # candidate sizes of the embeddings it hands the text model
    file_type: str  # F16, Q8_0, ... (from general.file_type)
    size: int
    image_size: int = 0  # the encoder's input, pixels a side
    patch_size: int = 0
    width: int = 0  # the vision tower's embedding
    n_ff: int = 0
    n_head: int = 0

    @property
    def compute_bytes(self) -> int:
        """An estimate of mtmd's compute buffer for one image: a few layers' activations (F32) and one
        layer's attention scores, for the encoder's patches (ggml reuses the rest of the graph's memory)."""
        n_pos = (self.image_size // self.patch_size) ** 2 + 1 if self.patch_size else 1024
        return 4 * n_pos * max(self.n_ff, 4 * self.width) * 4 + 2 * max(1, self.n_head) * n_pos * n_pos * 4 + 16 * 2**20

    def fits(self, n_embd: int) -> bool:
        return n_embd in self.output_widths

    @property
    def rank(self) -> int:
        return PREFERRED.index(self.file_type) if self.file_type in PREFERRED else len(PREFERRED)


_FILE_TYPES = {0: "F32", 1: "F16", 7: "Q8_0", 32: "BF16", 2: "Q4_0", 3: "Q4_1", 8: "Q5_0", 9: "Q5_1"}


def read_projector(path: Path | str) -> ProjectorInfo | None:
    """The projector facts of ``path``, or None when it is not a readable vision projector."""
    path = Path(path)
    try:
        st = path.stat()
    except OSError:
        return None
    return _read(str(path), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=256)
def _read(path: str, size: int, mtime_ns: int) -> ProjectorInfo | None:
    if not_regular(path) is not None:
        return None
    try:
        fh, size = open_regular(path)
        with fh:
            header = parse(fh, min(size, HEADER_READ), size > HEADER_READ, path)
    except (FiresideError, OSError):
        return None
    return from_header(Path(path), header, size)


def from_header(path: Path, header: Header, size: int) -> ProjectorInfo | None:
    """The projector facts a parsed header holds (a local file's, or a hub file's read by Range)."""
    kv = header.kv
    kind = kv.get("clip.projector_type") or kv.get("clip.vision.projector_type")
    if kv.get("general.architecture") != "clip" or not isinstance(kind, str) or kv.get("clip.has_vision_encoder") is False:
        return None
    widths = {int(d) for t in header.tensors if t.name.startswith("mm.") for d in t.shape}
    if isinstance(kv.get("clip.vision.projection_dim"), int):
        widths.add(int(kv["clip.vision.projection_dim"]))
    ftype = kv.get("general.file_type")
    def num(key: str) -> int:
        value = kv.get(f"clip.vision.{key}")
        return int(value) if isinstance(value, int) and 0 < value < 1 << 20 else 0

    return ProjectorInfo(path, kind, frozenset(widths), _FILE_TYPES.get(ftype, "?") if isinstance(ftype, int) else "?",
                         size, num("image_size"), num("patch_size"), num("embedding_length"),
                         num("feed_forward_length"), num("attention.head_count"))


def best(projectors: list[ProjectorInfo | None], n_embd: int) -> ProjectorInfo | None:
    """The projector, of those given, that fits a text model ``n_embd`` wide: F16 first, then Q8_0, ..."""
    fitting = [p for p in projectors if p is not None and p.fits(n_embd)]
    return min(fitting, key=lambda p: (p.rank, p.path.name)) if fitting else None


def pair(folder: Path, n_embd: int) -> ProjectorInfo | None:
    """The best projector in ``folder`` (a hub repo's folder) for a text model ``n_embd`` wide."""
    try:
        candidates = [p for p in folder.iterdir() if p.suffix.lower() == ".gguf" and "mmproj" in p.name.lower()]
    except OSError:
        return None
    return best([read_projector(p) for p in sorted(candidates)], n_embd)

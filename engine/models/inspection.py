"""Read what a GGUF model is from its header alone, without loading it, and refuse hostile headers.

``inspect_file(path)`` reads a whole model file (or every part of a split set) and checks that each
tensor lies inside its file; ``inspect_header(data)`` reads the first bytes of a file, such as the
first megabytes fetched from the hub with an HTTP Range request, and raises ``HeaderIncomplete`` when
more bytes are needed. Both parse the header with bounded reads: every string, array and dimension
count is checked against a sane cap and against the bytes that are actually there *before* anything
is allocated, so a crafted header cannot make Fireside allocate gigabytes or loop for minutes.

The ``gguf`` package supplies the format's constants (value types, quantization block sizes, file
types); its ``GGUFReader`` maps whole files and trusts their counts, so it is not used for parsing.
"""

from __future__ import annotations

import io
import re
import struct
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType, LlamaFileType

from ..errors import HeaderIncomplete, InvalidModelFile

GGUF_MAGIC = b"GGUF"
MAX_STRING = 64 * 1024 * 1024  # chat templates run to tens of KB; 64 MiB is far past any real one
MAX_ARRAY = 16 * 1024 * 1024  # vocabularies and merges stay well under a million entries
MAX_KV = 65_536
MAX_TENSORS = 1_000_000
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_DIM_SIZE = 1 << 40
KEPT_ARRAY_ITEMS = 4096  # longer arrays are skimmed; their length is kept, their items are not
SPLIT_RE = re.compile(r"^(?P<stem>.*)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)

_SCALARS: dict[int, struct.Struct] = {
    GGUFValueType.UINT8: struct.Struct("<B"),
    GGUFValueType.INT8: struct.Struct("<b"),
    GGUFValueType.UINT16: struct.Struct("<H"),
    GGUFValueType.INT16: struct.Struct("<h"),
    GGUFValueType.UINT32: struct.Struct("<I"),
    GGUFValueType.INT32: struct.Struct("<i"),
    GGUFValueType.FLOAT32: struct.Struct("<f"),
    GGUFValueType.BOOL: struct.Struct("<?"),
    GGUFValueType.UINT64: struct.Struct("<Q"),
    GGUFValueType.INT64: struct.Struct("<q"),
    GGUFValueType.FLOAT64: struct.Struct("<d"),
}
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")

# Bytes per element of the KV cache types llama.cpp offers (q8_0: 34 bytes per 32, q4_0: 18 per 32).
KV_TYPE_BYTES: dict[str, float] = {"f16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32}


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    type_name: str
    offset: int
    n_bytes: int
    file_index: int = 0

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass
class ModelInfo:
    """Everything Fireside knows about a model before loading it. Plain data: safe to copy and send."""

    path: str
    architecture: str
    name: str
    file_size: int
    parameter_count: int
    file_type: str
    quant_mix: dict[str, int]  # tensor type -> bytes of weights in it
    context_length: int
    block_count: int
    embedding_length: int
    head_count: int
    head_count_kv: list[int]  # per layer; a model may vary it layer by layer
    key_length: int
    value_length: int
    vocab_size: int
    sliding_window: int | None = None
    expert_count: int | None = None
    expert_used_count: int | None = None
    chat_template: str | None = None
    bos_token: str | None = None
    eos_token: str | None = None
    split_files: list[str] = field(default_factory=list)
    layer_bytes: list[int] = field(default_factory=list)  # bytes of each repeating block
    other_bytes: dict[str, int] = field(default_factory=dict)  # "input", "output" and "other" tensors
    tied_embeddings: bool = False  # no output.weight: the token embedding doubles as the output layer
    metadata: dict[str, object] = field(default_factory=dict)  # scalars and short arrays, verbatim
    header_size: int = 0

    @property
    def weights_bytes(self) -> int:
        return sum(self.layer_bytes) + sum(self.other_bytes.values())

    def kv_bytes_per_token(self, kv_type: str = "f16") -> int:
        """Bytes the KV cache takes per token of context: layers x KV heads x (K + V head dims) x bytes."""
        per_elem = KV_TYPE_BYTES[kv_type]
        elems = sum(n_kv * (self.key_length + self.value_length) for n_kv in self.head_count_kv)
        return int(elems * per_elem)

    def kv_bytes_per_token_by_layer(self, kv_type: str = "f16") -> list[int]:
        per_elem = KV_TYPE_BYTES[kv_type]
        return [int(n_kv * (self.key_length + self.value_length) * per_elem) for n_kv in self.head_count_kv]

    def to_dict(self) -> dict[str, object]:
        from dataclasses import asdict

        out = asdict(self)
        out.pop("metadata")
        out["weights_bytes"] = self.weights_bytes
        out["kv_bytes_per_token"] = {t: self.kv_bytes_per_token(t) for t in KV_TYPE_BYTES}
        return out


class _Reader:
    """Bounded little-endian reads over a file object; every read checks the bytes remaining first."""

    def __init__(self, fh: BinaryIO, size: int, partial: bool, label: str):
        self.fh, self.size, self.partial, self.label = fh, size, partial, label
        self.pos = 0

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > self.size:
            if self.partial:
                raise HeaderIncomplete(
                    f"{self.label}: the header continues past the {self.size:,} bytes given ({what})",
                    needed=self.pos + n,
                )
            raise InvalidModelFile(f"{self.label}: file ends inside the header while reading {what} "
                                   f"at byte {self.pos:,} (the file is truncated or corrupt)")
        data = self.fh.read(n)
        if len(data) != n:
            raise InvalidModelFile(f"{self.label}: short read at byte {self.pos:,} while reading {what}")
        self.pos += n
        return data

    def u32(self, what: str) -> int:
        return _U32.unpack(self.take(4, what))[0]

    def u64(self, what: str) -> int:
        return _U64.unpack(self.take(8, what))[0]

    def string(self, what: str) -> str:
        n = self.u64(f"length of {what}")
        if n > MAX_STRING:
            raise InvalidModelFile(f"{self.label}: {what} claims {n:,} bytes, past the {MAX_STRING:,}-byte cap")
        raw = self.take(n, what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw.decode("utf-8", errors="replace")

    def unread(self, n: int) -> None:
        """Step back over the last ``n`` bytes taken (they were read ahead, not used)."""
        if n:
            self.fh.seek(-n, io.SEEK_CUR)
            self.pos -= n

    def skip(self, n: int, what: str) -> None:
        if n < 0 or self.pos + n > self.size:
            self.take(n, what)  # raises the right error
        self.fh.seek(n, io.SEEK_CUR)
        self.pos += n


def _read_value(r: _Reader, vtype: int, key: str, depth: int = 0) -> object:
    if vtype in _SCALARS:
        s = _SCALARS[vtype]
        return s.unpack(r.take(s.size, key))[0]
    if vtype == GGUFValueType.STRING:
        return r.string(key)
    if vtype == GGUFValueType.ARRAY:
        if depth > 0:
            raise InvalidModelFile(f"{r.label}: {key} nests arrays, which GGUF readers do not accept")
        item_type = r.u32(f"item type of {key}")
        count = r.u64(f"length of {key}")
        if count > MAX_ARRAY:
            raise InvalidModelFile(f"{r.label}: array {key} claims {count:,} items, past the {MAX_ARRAY:,} cap")
        return _read_array(r, item_type, count, key)
    raise InvalidModelFile(f"{r.label}: {key} has unknown value type {vtype}")


def _read_array(r: _Reader, item_type: int, count: int, key: str) -> object:
    keep = count <= KEPT_ARRAY_ITEMS or key == "tokenizer.ggml.tokens"
    if item_type in _SCALARS:
        s = _SCALARS[item_type]
        total = s.size * count
        if not keep:
            r.skip(total, key)
            return _Skimmed(count)
        return [v[0] for v in s.iter_unpack(r.take(total, key))]
    if item_type == GGUFValueType.STRING:
        if count * 8 > r.size - r.pos and not r.partial:
            raise InvalidModelFile(f"{r.label}: array {key} claims {count:,} strings, more than the file holds")
        items = _read_strings(r, count, key, keep)
        return items if keep else _Skimmed(count)
    if item_type == GGUFValueType.ARRAY:
        raise InvalidModelFile(f"{r.label}: {key} nests arrays, which GGUF readers do not accept")
    raise InvalidModelFile(f"{r.label}: array {key} has unknown item type {item_type}")


def _read_strings(r: _Reader, count: int, key: str, keep: bool) -> list[str]:
    """Read ``count`` length-prefixed strings. Vocabularies hold 50,000 to 250,000 of them, so this
    parses blocks in memory rather than calling the bounded reader twice per string; every length
    is still checked before it is used, and a block that runs out is refilled through ``take``."""
    items: list[str] = []
    unpack = _U64.unpack_from
    block, off, size, done = b"", 0, 0, 0
    while done < count:
        if off + 8 <= size:
            end = off + 8 + unpack(block, off)[0]
            if end <= size:
                if keep:
                    items.append(block[off + 8:end].decode("utf-8", errors="replace"))
                off, done = end, done + 1
                continue
            need = end - off
        else:
            need = 8
        if need - 8 > MAX_STRING:
            raise InvalidModelFile(f"{r.label}: {key}[{done}] claims {need - 8:,} bytes")
        r.unread(size - off)
        want = max(need, min(BLOCK, r.size - r.pos))  # past the end, take() raises the right error
        block, off = r.take(want, key), 0
        size = len(block)
    r.unread(size - off)
    return items


BLOCK = 1 << 20


@dataclass(frozen=True)
class _Skimmed:
    """An array read past without keeping its items."""

    count: int


def _type_bytes(type_id: int, n_elements: int, label: str, name: str) -> tuple[str, int]:
    try:
        qtype = GGMLQuantizationType(type_id)
        block, size = GGML_QUANT_SIZES[qtype]
    except (ValueError, KeyError):
        raise InvalidModelFile(f"{label}: tensor {name} has unknown type {type_id}") from None
    if n_elements % block:
        raise InvalidModelFile(f"{label}: tensor {name} has {n_elements} elements, not a multiple of "
                               f"{qtype.name}'s block of {block}")
    return qtype.name, n_elements // block * size


@dataclass
class Header:
    version: int
    kv: dict[str, object]
    tensors: list[TensorInfo]
    data_offset: int


def _parse(fh: BinaryIO, size: int, partial: bool, label: str, file_index: int = 0) -> Header:
    r = _Reader(fh, size, partial, label)
    magic = r.take(4, "magic")
    if magic != GGUF_MAGIC:
        raise InvalidModelFile(f"{label}: not a GGUF file (starts with {magic!r}, expected b'GGUF')")
    version = r.u32("version")
    if version not in (2, 3):
        raise InvalidModelFile(f"{label}: GGUF version {version} is not supported (only 2 and 3)")
    n_tensors = r.u64("tensor count")
    n_kv = r.u64("metadata count")
    if n_tensors > MAX_TENSORS:
        raise InvalidModelFile(f"{label}: header claims {n_tensors:,} tensors, past the {MAX_TENSORS:,} cap")
    if n_kv > MAX_KV:
        raise InvalidModelFile(f"{label}: header claims {n_kv:,} metadata entries, past the {MAX_KV:,} cap")
    kv: dict[str, object] = {}
    for i in range(n_kv):
        key = r.string(f"metadata key #{i}")
        kv[key] = _read_value(r, r.u32(f"type of {key}"), key)
    tensors = [_read_tensor(r, label, file_index) for _ in range(n_tensors)]
    alignment = kv.get("general.alignment", 32)
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1) or alignment > 1 << 20:
        raise InvalidModelFile(f"{label}: general.alignment {alignment!r} is not a power of two")
    data_offset = (r.pos + alignment - 1) // alignment * alignment
    return Header(version, kv, tensors, data_offset)


def _read_tensor(r: _Reader, label: str, file_index: int) -> TensorInfo:
    name = r.string("tensor name")
    n_dims = r.u32(f"dimension count of {name}")
    if n_dims == 0 or n_dims > MAX_DIMS:
        raise InvalidModelFile(f"{label}: tensor {name} has {n_dims} dimensions (1 to {MAX_DIMS} allowed)")
    shape = tuple(r.u64(f"dimension of {name}") for _ in range(n_dims))
    n_elements = 1
    for d in shape:
        if d == 0 or d > MAX_DIM_SIZE:
            raise InvalidModelFile(f"{label}: tensor {name} has an impossible dimension {d:,}")
        n_elements *= d
    if n_elements > MAX_DIM_SIZE:
        raise InvalidModelFile(f"{label}: tensor {name} claims {n_elements:,} elements")
    type_name, n_bytes = _type_bytes(r.u32(f"type of {name}"), n_elements, label, name)
    offset = r.u64(f"offset of {name}")
    return TensorInfo(name, shape, type_name, offset, n_bytes, file_index)


def _check_extents(header: Header, size: int, label: str) -> None:
    for t in header.tensors:
        end = header.data_offset + t.offset + t.n_bytes
        if end > size:
            raise InvalidModelFile(f"{label}: tensor {t.name} runs to byte {end:,}, past the end of the "
                                   f"file ({size:,} bytes); the file is truncated or corrupt")


def read_header(data: bytes, name: str = "header", file_index: int = 0) -> Header:
    """Parse one file's header from its first bytes (``HeaderIncomplete`` asks for more)."""
    return _parse(io.BytesIO(data), len(data), partial=True, label=name, file_index=file_index)


def summarize_headers(name: str, total_size: int, headers: list[Header]) -> ModelInfo:
    """One ``ModelInfo`` from the headers of every part of a model (the first holds the metadata)."""
    return _summarize(name, total_size, headers)


def inspect_header(data: bytes, name: str = "header", file_size: int | None = None) -> ModelInfo:
    """Inspect a model from the first bytes of its file (no extent checks: the data may be missing).

    Raises ``HeaderIncomplete`` (with ``needed``) when the header runs past ``data``.
    """
    header = _parse(io.BytesIO(data), len(data), partial=True, label=name)
    return _summarize(name, file_size or len(data), [header])


def inspect_file(path: str | Path) -> ModelInfo:
    """Inspect a GGUF file (every part, for a split set) and check each tensor lies inside its file."""
    path = Path(path)
    parts = split_parts(path)
    headers = []
    total = 0
    for index, part in enumerate(parts):
        label = part.name
        try:
            size = part.stat().st_size
            with part.open("rb") as fh:
                header = _parse(fh, size, partial=False, label=label, file_index=index)
        except OSError as exc:
            raise InvalidModelFile(f"{label}: cannot read: {exc.strerror or exc}") from exc
        _check_extents(header, size, label)
        headers.append(header)
        total += size
    info = _summarize(str(path), total, headers)
    info.split_files = [str(p) for p in parts] if len(parts) > 1 else []
    return info


def split_parts(path: Path) -> list[Path]:
    """The files of a split set (``x-00001-of-00003.gguf``) in order, or just ``[path]``."""
    m = SPLIT_RE.match(path.name)
    if not m:
        return [path]
    count = int(m["count"])
    if count < 1 or count > 9999:
        raise InvalidModelFile(f"{path.name}: impossible split count {count}")
    parts = [path.with_name(f"{m['stem']}-{i:05d}-of-{count:05d}.gguf") for i in range(1, count + 1)]
    missing = [p.name for p in parts if not p.exists()]
    if missing:
        raise InvalidModelFile(f"{path.name}: split set is missing {', '.join(missing)}")
    return parts


_LAYER_RE = re.compile(r"^blk\.(\d+)\.")


def _summarize(path: str, file_size: int, headers: list[Header]) -> ModelInfo:
    kv = headers[0].kv
    tensors = [t for h in headers for t in h.tensors]
    arch = _get(kv, "general.architecture", str, None)
    if not arch:
        raise InvalidModelFile(f"{Path(path).name}: no general.architecture in the header")

    def a(key: str, default: object = None) -> object:
        return kv.get(f"{arch}.{key}", default)

    n_layers = _as_int(a("block_count"), path, "block_count")
    n_embd = _as_int(a("embedding_length", 0), path, "embedding_length")
    heads = a("attention.head_count", 0)
    n_head = max(heads) if isinstance(heads, list) and heads else _as_int(heads, path, "head_count")
    kv_heads = a("attention.head_count_kv", n_head)
    if isinstance(kv_heads, list):
        kv_per_layer = [int(x) for x in kv_heads][:n_layers]
    else:
        kv_per_layer = [_as_int(kv_heads, path, "head_count_kv")] * n_layers
    head_dim = n_embd // n_head if n_head else 0
    key_len = _as_int(a("attention.key_length", head_dim), path, "key_length")
    val_len = _as_int(a("attention.value_length", head_dim), path, "value_length")

    layer_bytes = [0] * n_layers
    other: dict[str, int] = defaultdict(int)
    mix: Counter[str] = Counter()
    params = 0
    for t in tensors:
        params += t.n_elements
        mix[t.type_name] += t.n_bytes
        m = _LAYER_RE.match(t.name)
        if m and int(m.group(1)) < n_layers:
            layer_bytes[int(m.group(1))] += t.n_bytes
        elif t.name.startswith("token_embd"):
            other["input"] += t.n_bytes
        elif t.name.startswith("output"):
            other["output"] += t.n_bytes
        else:
            other["other"] += t.n_bytes
    tied = not any(t.name == "output.weight" for t in tensors)

    tokens = kv.get("tokenizer.ggml.tokens")
    vocab = len(tokens) if isinstance(tokens, list) else (tokens.count if isinstance(tokens, _Skimmed) else 0)
    ftype = kv.get("general.file_type")
    try:
        file_type = LlamaFileType(ftype).name.removeprefix("MOSTLY_") if isinstance(ftype, int) else _main_type(mix)
    except ValueError:
        file_type = _main_type(mix)

    return ModelInfo(
        path=path,
        architecture=arch,
        name=_get(kv, "general.name", str, Path(path).stem),
        file_size=file_size,
        parameter_count=params,
        file_type=file_type,
        quant_mix=dict(mix.most_common()),
        context_length=_as_int(a("context_length", 0), path, "context_length"),
        block_count=n_layers,
        embedding_length=n_embd,
        head_count=n_head,
        head_count_kv=kv_per_layer,
        key_length=key_len,
        value_length=val_len,
        vocab_size=vocab,
        sliding_window=_opt_int(a("attention.sliding_window")),
        expert_count=_opt_int(a("expert_count")),
        expert_used_count=_opt_int(a("expert_used_count")),
        chat_template=_get(kv, "tokenizer.chat_template", str, None),
        bos_token=_token(kv, tokens, "bos"),
        eos_token=_token(kv, tokens, "eos"),
        layer_bytes=layer_bytes,
        other_bytes=dict(other),
        tied_embeddings=tied,
        metadata={k: v for k, v in kv.items() if not isinstance(v, _Skimmed) and (not isinstance(v, list) or len(v) <= 64)},
        header_size=headers[0].data_offset,
    )


def _main_type(mix: Counter[str]) -> str:
    return mix.most_common(1)[0][0] if mix else "unknown"


def _get(kv: dict[str, object], key: str, typ: type, default: object) -> object:
    v = kv.get(key, default)
    return v if isinstance(v, typ) else default


def _as_int(v: object, path: str, key: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or v > 1 << 40:
        raise InvalidModelFile(f"{Path(path).name}: metadata {key} is missing or not a sane number ({v!r})")
    return int(v)


def _opt_int(v: object) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None


def _token(kv: dict[str, object], tokens: object, which: str) -> str | None:
    tid = kv.get(f"tokenizer.ggml.{which}_token_id")
    if isinstance(tid, int) and isinstance(tokens, list) and 0 <= tid < len(tokens):
        return tokens[tid]
    return None

"""The bounded GGUF header parser: hostile bytes in, a ``Header`` or ``InvalidModelFile`` out.

A GGUF header is counts followed by what they count: metadata entries (typed values, strings,
arrays), then tensor infos. Every count and length is checked against a cap and against the bytes
that are actually there *before* anything is allocated or looped over, so a crafted header cannot
make Fireside allocate gigabytes or loop for minutes:

- the whole header (metadata and tensor infos) ends within ``MAX_HEADER`` bytes, and the metadata and
  tensor counts must fit in it (and in the file) at their smallest encoding;
- strings, keys, tensor names and arrays have caps of their own; arrays do not nest (GGUF readers
  refuse that anyway); at most ``MAX_ARRAY_STRINGS`` strings are walked in arrays and at most
  ``MAX_KEPT`` array items are kept as Python objects, over the whole header;
- a key or tensor name that appears twice, a ``general.alignment`` that is not a uint32 power of two,
  and a tensor offset off that alignment are refused, as llama.cpp refuses them.

The ``gguf`` package supplies the format's constants (value types, quantization block sizes); its
``GGUFReader`` maps whole files and trusts their counts, so it is not used for parsing.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from typing import BinaryIO

from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType

from ..errors import HeaderIncomplete, InvalidModelFile

GGUF_MAGIC = b"GGUF"
MAX_HEADER = 64 * 1024 * 1024  # metadata and tensor infos; real ones, vocabularies included, are a few MB
MAX_STRING = 16 * 1024 * 1024  # one string value; chat templates run to tens of KB
MAX_KEY = 65_535  # the GGUF spec's limit on a key's length
MAX_TENSOR_NAME = 64  # GGML_MAX_NAME: llama.cpp cannot load a longer name
MAX_ARRAY = 16 * 1024 * 1024  # items in one array; vocabularies and merges stay well under a million
MAX_ARRAY_STRINGS = 1 << 22  # strings in all arrays together, each walked in Python: bounds the time
MAX_KV = 65_536
MAX_TENSORS = 262_144  # the largest released models have a few thousand
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_ELEMENTS = 1 << 40  # in one tensor
MAX_ALIGNMENT = 1 << 20
MAX_KEPT = 1 << 21  # array items kept as Python objects across a header, the vocabulary included
KEPT_ARRAY_ITEMS = 4096  # longer arrays (bar the vocabulary) are skimmed: their length is kept, not their items
TOKENS_KEY = "tokenizer.ggml.tokens"
_MIN_KV = 8 + 4 + 1  # key length, value type, the smallest value
_MIN_TENSOR = 8 + 4 + 8 + 4 + 8  # name length, dimension count, one dimension, type, offset
_FIXED = 4 + 4 + 8 + 8  # magic, version, tensor count, metadata count

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
BLOCK = 1 << 20


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
class Header:
    version: int
    kv: dict[str, object]
    tensors: list[TensorInfo]
    data_offset: int


@dataclass(frozen=True)
class Skimmed:
    """An array read past without keeping its items."""

    count: int


def show(value: object, width: int = 60) -> str:
    """A short repr for an error message, whatever the value's size."""
    if isinstance(value, (list, Skimmed)):
        return f"an array of {len(value) if isinstance(value, list) else value.count:,} items"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    text = repr(value[:width] if isinstance(value, str) else value)
    return text if len(text) <= width else text[:width] + "..."


class _Reader:
    """Bounded little-endian reads over a file object; every read checks the bytes remaining first."""

    def __init__(self, fh: BinaryIO, size: int, partial: bool, label: str):
        self.fh, self.size, self.partial, self.label = fh, size, partial, label
        self.pos = 0
        self.kept = MAX_KEPT
        self.strings = MAX_ARRAY_STRINGS

    def room(self) -> int:
        """Bytes the header may still take: up to the cap, and up to the end of a whole file."""
        return MAX_HEADER - self.pos if self.partial else min(MAX_HEADER, self.size) - self.pos

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > MAX_HEADER:
            raise InvalidModelFile(f"{self.label}: the header runs past {MAX_HEADER // 2**20} MiB while "
                                   f"reading {what}; Fireside does not read headers that large")
        if self.pos + n > self.size:
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

    def string(self, what: str, cap: int = MAX_STRING) -> str:
        n = self.u64(f"length of {what}")
        if n > cap:
            raise InvalidModelFile(f"{self.label}: {what} claims {n:,} bytes, past the {cap:,}-byte cap")
        return self.take(n, what).decode("utf-8", errors="replace")

    def unread(self, n: int) -> None:
        """Step back over the last ``n`` bytes taken (they were read ahead, not used)."""
        if n:
            self.fh.seek(-n, io.SEEK_CUR)
            self.pos -= n

    def skip(self, n: int, what: str) -> None:
        if n < 0 or self.pos + n > min(self.size, MAX_HEADER):
            self.take(n, what)  # raises the right error
        self.fh.seek(n, io.SEEK_CUR)
        self.pos += n

    def keep(self, count: int) -> bool:
        """Whether ``count`` more items may be kept as Python objects (and count them if so)."""
        if count > self.kept:
            return False
        self.kept -= count
        return True


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
    if item_type in _SCALARS:
        s = _SCALARS[item_type]
        total = s.size * count
        if count > KEPT_ARRAY_ITEMS or not r.keep(count):
            r.skip(total, key)
            return Skimmed(count)
        return [v[0] for v in s.iter_unpack(r.take(total, key))]
    if item_type == GGUFValueType.STRING:
        if count * 8 > r.room():
            raise InvalidModelFile(f"{r.label}: array {key} claims {count:,} strings, more than the "
                                   f"{'header cap' if r.partial else 'file'} can hold")
        r.strings -= count
        if r.strings < 0:
            raise InvalidModelFile(f"{r.label}: the header's arrays hold more than {MAX_ARRAY_STRINGS:,} strings "
                                   f"(real vocabularies and merges hold under a million)")
        keep = (count <= KEPT_ARRAY_ITEMS or key == TOKENS_KEY) and r.keep(count)
        items = _read_strings(r, count, key, keep)
        return items if keep else Skimmed(count)
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
        want = max(need, min(BLOCK, r.size - r.pos, MAX_HEADER - r.pos))  # past either, take() raises
        block, off = r.take(want, key), 0
        size = len(block)
    r.unread(size - off)
    return items


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


def parse(fh: BinaryIO, size: int, partial: bool, label: str, file_index: int = 0) -> Header:
    """Parse one file's header from ``fh`` (``size`` bytes; ``partial``: only its first bytes)."""
    r = _Reader(fh, size, partial, label)
    magic = r.take(4, "magic")
    if magic != GGUF_MAGIC:
        raise InvalidModelFile(f"{label}: not a GGUF file (starts with {magic!r}, expected b'GGUF')")
    version = r.u32("version")
    if version not in (2, 3):
        raise InvalidModelFile(f"{label}: GGUF version {version} is not supported (only 2 and 3)")
    n_tensors = r.u64("tensor count")
    n_kv = r.u64("metadata count")
    _check_counts(r, n_tensors, n_kv)
    kv = _read_kv(r, n_kv)
    alignment = _alignment(kv, label)
    tensors, names = [], set()
    for _ in range(n_tensors):
        t = _read_tensor(r, label, file_index, alignment)
        if t.name in names:
            raise InvalidModelFile(f"{label}: tensor {t.name!r} appears twice in the header")
        names.add(t.name)
        tensors.append(t)
    data_offset = (r.pos + alignment - 1) // alignment * alignment
    return Header(version, kv, tensors, data_offset)


def _check_counts(r: _Reader, n_tensors: int, n_kv: int) -> None:
    label = r.label
    if n_tensors > MAX_TENSORS:
        raise InvalidModelFile(f"{label}: header claims {n_tensors:,} tensors, past the {MAX_TENSORS:,} cap")
    if n_kv > MAX_KV:
        raise InvalidModelFile(f"{label}: header claims {n_kv:,} metadata entries, past the {MAX_KV:,} cap")
    least = n_kv * _MIN_KV + n_tensors * _MIN_TENSOR
    if least > r.room():
        where = f"the {MAX_HEADER // 2**20} MiB header cap" if r.partial or r.size > MAX_HEADER else \
            f"the file's {r.size:,} bytes (the file is truncated or corrupt)"
        raise InvalidModelFile(f"{label}: header claims {n_kv:,} metadata entries and {n_tensors:,} tensors, "
                               f"which take at least {_FIXED + least:,} bytes, more than {where}")


def _read_kv(r: _Reader, n_kv: int) -> dict[str, object]:
    kv: dict[str, object] = {}
    for i in range(n_kv):
        key = r.string(f"metadata key #{i}", MAX_KEY)
        if key in kv:
            raise InvalidModelFile(f"{r.label}: metadata key {show(key)} appears twice in the header")
        vtype = r.u32(f"type of {key}")
        if key == "general.alignment" and vtype != GGUFValueType.UINT32:
            raise InvalidModelFile(f"{r.label}: general.alignment has value type {vtype}, not the uint32 "
                                   f"GGUF requires")
        kv[key] = _read_value(r, vtype, key)
    return kv


def _alignment(kv: dict[str, object], label: str) -> int:
    alignment = kv.get("general.alignment", 32)
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1) or alignment > MAX_ALIGNMENT:
        raise InvalidModelFile(f"{label}: general.alignment {show(alignment)} is not a power of two "
                               f"from 1 to {MAX_ALIGNMENT:,}")
    return alignment


def _read_tensor(r: _Reader, label: str, file_index: int, alignment: int) -> TensorInfo:
    name = r.string("tensor name", MAX_TENSOR_NAME)
    n_dims = r.u32(f"dimension count of {name}")
    if n_dims == 0 or n_dims > MAX_DIMS:
        raise InvalidModelFile(f"{label}: tensor {name} has {n_dims} dimensions (1 to {MAX_DIMS} allowed)")
    shape = tuple(r.u64(f"dimension of {name}") for _ in range(n_dims))
    n_elements = 1
    for d in shape:
        if d == 0 or d > MAX_ELEMENTS:
            raise InvalidModelFile(f"{label}: tensor {name} has an impossible dimension {d:,}")
        n_elements *= d
    if n_elements > MAX_ELEMENTS:
        raise InvalidModelFile(f"{label}: tensor {name} claims {n_elements:,} elements")
    type_name, n_bytes = _type_bytes(r.u32(f"type of {name}"), n_elements, label, name)
    offset = r.u64(f"offset of {name}")
    if offset % alignment:
        raise InvalidModelFile(f"{label}: tensor {name} starts at offset {offset:,}, not a multiple of the "
                               f"file's alignment ({alignment})")
    return TensorInfo(name, shape, type_name, offset, n_bytes, file_index)

"""Read what a GGUF model is from its header alone, without loading it, and refuse hostile headers.

``inspect_file(path)`` reads a whole model file (or every part of a split set) and checks that each
tensor lies inside its file; ``inspect_header(data)`` reads the first bytes of a file, such as the
first megabytes fetched from the hub with an HTTP Range request, and raises ``HeaderIncomplete`` when
more bytes are needed. The header is parsed by ``header.parse``, whose every count is bounded before
it is used; the summary here then checks each number it builds on (layers, context, widths, heads)
against a cap before allocating by it, so a crafted header cannot make Fireside allocate gigabytes or
loop for minutes, here or in the fit planner. Anything wrong raises ``InvalidModelFile`` and nothing
else: ``tests/engine/models/test_gguf_fuzz.py`` holds the reader to that.
"""

from __future__ import annotations

import io
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from gguf import LlamaFileType

from ..errors import InvalidModelFile
from .files import open_regular
from .header import TOKENS_KEY, Header, Skimmed, TensorInfo, parse, show

__all__ = ["Header", "ModelInfo", "TensorInfo", "inspect_file", "inspect_header", "read_header",
           "split_parts", "summarize_headers"]

SPLIT_RE = re.compile(r"^(?P<stem>.*)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)

# Caps on the numbers a summary is built from; each is far past any released model, and each bounds
# an allocation or a loop here or in the fit planner (which walks the layers).
MAX_BLOCKS = 4096  # layers; the deepest released models have under 200
MAX_CONTEXT = 1 << 26  # tokens; the longest claimed context is 10M
MAX_WIDTH = 1 << 20  # embedding length; the widest models are about 25,000
MAX_HEADS = 1 << 16  # attention heads, KV heads, head dimensions and experts
MAX_NAME = 256  # characters of an architecture name ("llama", "qwen3moe")

# Bytes per element of the KV cache types llama.cpp offers (q8_0: 34 bytes per 32, q4_0: 18 per 32).
KV_TYPE_BYTES: dict[str, float] = {"f16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32}


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
    expert_bytes: list[int] = field(default_factory=list)  # of which a MoE model's experts (EXPERTS_PATTERN)
    # where each group of tensors lies in the file, [file index, first byte, end]: "input", "output", "other",
    # "blk.N" (a layer) and "exps.N" (its experts); llama.cpp maps host tensors as one range per file
    spans: dict[str, list[int]] = field(default_factory=dict)
    other_bytes: dict[str, int] = field(default_factory=dict)  # "input", "output" and "other" tensors
    tied_embeddings: bool = False  # no output.weight: the token embedding doubles as the output layer
    metadata: dict[str, object] = field(default_factory=dict)  # scalars and short arrays, verbatim
    header_size: int = 0

    @property
    def embeds_only(self) -> bool:
        """An encoder (non-causal attention: BERT, nomic-bert, bge, MiniLM): it turns text into vectors for
        search and cannot write a reply."""
        return self.metadata.get(f"{self.architecture}.attention.causal") is False

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


def _check_extents(header: Header, size: int, label: str) -> None:
    for t in header.tensors:
        end = header.data_offset + t.offset + t.n_bytes
        if end > size:
            raise InvalidModelFile(f"{label}: tensor {t.name} runs to byte {end:,}, past the end of the "
                                   f"file ({size:,} bytes); the file is truncated or corrupt")


def read_header(data: bytes, name: str = "header", file_index: int = 0) -> Header:
    """Parse one file's header from its first bytes (``HeaderIncomplete`` asks for more)."""
    return parse(io.BytesIO(data), len(data), partial=True, label=name, file_index=file_index)


def summarize_headers(name: str, total_size: int, headers: list[Header]) -> ModelInfo:
    """One ``ModelInfo`` from the headers of every part of a model (the first holds the metadata)."""
    return _summarize(name, total_size, headers)


def inspect_header(data: bytes, name: str = "header", file_size: int | None = None) -> ModelInfo:
    """Inspect a model from the first bytes of its file (no extent checks: the data may be missing).

    Raises ``HeaderIncomplete`` (with ``needed``) when the header runs past ``data``.
    """
    header = parse(io.BytesIO(data), len(data), partial=True, label=name)
    return _summarize(name, file_size or len(data), [header])


def inspect_file(path: str | Path) -> ModelInfo:
    """Inspect a GGUF file (every part, for a split set) and check each tensor lies inside its file.

    Only regular files are opened, and never with a read that can block (``files.open_regular``)."""
    path = Path(path)
    parts = split_parts(path)
    headers = []
    total = 0
    for index, part in enumerate(parts):
        label = part.name
        fh, size = open_regular(part)
        try:
            with fh:
                header = parse(fh, size, partial=False, label=label, file_index=index)
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
        raise InvalidModelFile(f"{path.name}: split set is missing {', '.join(missing[:3])}"
                               + (f" and {len(missing) - 3} more" if len(missing) > 3 else ""))
    return parts


_LAYER_RE = re.compile(r"^blk\.(\d{1,9})\.")
# A MoE model's experts, every expert of a layer in one tensor: llama.cpp's own pattern for them
# (LLM_FFN_EXPS_REGEX, what llama-server's --cpu-moe keeps in host memory)
EXPERTS_PATTERN = r"\.ffn_(up|down|gate|gate_up)_(ch|)exps"


class _Numbers:
    """The architecture's numbers from the metadata, each checked: a whole number within its cap.

    Integers only: GGUF writes counts as integers, and a float (NaN, infinity) or a string where a
    count belongs is a broken or hostile file."""

    def __init__(self, kv: dict[str, object], arch: str, label: str):
        self.kv, self.arch, self.label = kv, arch, label

    def count(self, key: str, cap: int, default: object = None) -> int:
        v = self.kv.get(f"{self.arch}.{key}", default)
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= cap:
            raise InvalidModelFile(f"{self.label}: metadata {self.arch}.{key} is {show(v)}, not a whole "
                                   f"number from 0 to {cap:,}")
        return v

    def counts(self, key: str, cap: int, default: object) -> list[int] | int:
        """A number that may be given per layer (an array)."""
        v = self.kv.get(f"{self.arch}.{key}", default)
        if not isinstance(v, list):
            return self.count(key, cap, default)
        if any(isinstance(x, bool) or not isinstance(x, int) or not 0 <= x <= cap for x in v):
            raise InvalidModelFile(f"{self.label}: metadata {self.arch}.{key} holds a value that is not a "
                                   f"whole number from 0 to {cap:,}")
        return v

    def optional(self, key: str, cap: int) -> int | None:
        v = self.kv.get(f"{self.arch}.{key}")
        return v if isinstance(v, int) and not isinstance(v, bool) and 0 < v <= cap else None


def _summarize(path: str, file_size: int, headers: list[Header]) -> ModelInfo:
    label = Path(path).name
    kv = headers[0].kv
    tensors = [t for h in headers for t in h.tensors]
    arch = kv.get("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise InvalidModelFile(f"{label}: no general.architecture in the header")
    if len(arch) > MAX_NAME:
        raise InvalidModelFile(f"{label}: general.architecture is {len(arch):,} characters long, not a name")
    num = _Numbers(kv, arch, label)

    n_layers = num.count("block_count", MAX_BLOCKS)
    n_embd = num.count("embedding_length", MAX_WIDTH, 0)
    heads = num.counts("attention.head_count", MAX_HEADS, 0)
    n_head = max(heads, default=0) if isinstance(heads, list) else heads
    kv_heads = num.counts("attention.head_count_kv", MAX_HEADS, n_head)
    kv_per_layer = kv_heads[:n_layers] if isinstance(kv_heads, list) else [kv_heads] * n_layers
    head_dim = n_embd // n_head if n_head else 0
    layer_bytes, expert_bytes, other = _weights(tensors, n_layers)
    mix: Counter[str] = Counter()
    for t in tensors:
        mix[t.type_name] += t.n_bytes

    tokens = kv.get(TOKENS_KEY)
    vocab = len(tokens) if isinstance(tokens, list) else (tokens.count if isinstance(tokens, Skimmed) else 0)
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
        parameter_count=sum(t.n_elements for t in tensors),
        file_type=file_type,
        quant_mix=dict(mix.most_common()),
        context_length=num.count("context_length", MAX_CONTEXT, 0),
        block_count=n_layers,
        embedding_length=n_embd,
        head_count=n_head,
        head_count_kv=kv_per_layer,
        key_length=num.count("attention.key_length", MAX_HEADS, head_dim),
        value_length=num.count("attention.value_length", MAX_HEADS, head_dim),
        vocab_size=vocab,
        sliding_window=num.optional("attention.sliding_window", MAX_CONTEXT),
        expert_count=num.optional("expert_count", MAX_HEADS),
        expert_used_count=num.optional("expert_used_count", MAX_HEADS),
        chat_template=_get(kv, "tokenizer.chat_template", str, None),
        bos_token=_token(kv, tokens, "bos"),
        eos_token=_token(kv, tokens, "eos"),
        layer_bytes=layer_bytes,
        expert_bytes=expert_bytes if any(expert_bytes) else [],
        spans=_spans(tensors, n_layers),
        other_bytes=other,
        tied_embeddings=not any(t.name == "output.weight" for t in tensors),
        metadata={k: v for k, v in kv.items() if not isinstance(v, Skimmed) and (not isinstance(v, list) or len(v) <= 64)},
        header_size=headers[0].data_offset,
    )


def _weights(tensors: list[TensorInfo], n_layers: int) -> tuple[list[int], list[int], dict[str, int]]:
    """Bytes of each repeating block, of the experts in each, and of the input, output and other tensors."""
    layer_bytes, expert_bytes = [0] * n_layers, [0] * n_layers
    other: dict[str, int] = defaultdict(int)
    experts = re.compile(EXPERTS_PATTERN)
    for t in tensors:
        m = _LAYER_RE.match(t.name)
        if m and int(m.group(1)) < n_layers:
            layer_bytes[int(m.group(1))] += t.n_bytes
            if experts.search(t.name):
                expert_bytes[int(m.group(1))] += t.n_bytes
        elif t.name.startswith("token_embd"):
            other["input"] += t.n_bytes
        elif t.name.startswith("output"):
            other["output"] += t.n_bytes
        else:
            other["other"] += t.n_bytes
    return layer_bytes, expert_bytes, dict(other)


def _spans(tensors: list[TensorInfo], n_layers: int) -> dict[str, list[int]]:
    """Each group's range of the file (``ModelInfo.spans``); a group whose tensors lie in two files keeps the first."""
    spans: dict[str, list[int]] = {}
    experts = re.compile(EXPERTS_PATTERN)

    def widen(group: str, t: TensorInfo) -> None:
        span = spans.setdefault(group, [t.file_index, t.offset, t.offset + t.n_bytes])
        if span[0] == t.file_index:
            span[1], span[2] = min(span[1], t.offset), max(span[2], t.offset + t.n_bytes)

    for t in tensors:
        m = _LAYER_RE.match(t.name)
        if m and int(m.group(1)) < n_layers:
            widen(f"blk.{m.group(1)}", t)
            if experts.search(t.name):
                widen(f"exps.{m.group(1)}", t)
        else:
            widen("input" if t.name.startswith("token_embd") else "output" if t.name.startswith("output") else "other", t)
    return spans


def _main_type(mix: Counter[str]) -> str:
    return mix.most_common(1)[0][0] if mix else "unknown"


def _get(kv: dict[str, object], key: str, typ: type, default: object) -> object:
    v = kv.get(key, default)
    return v if isinstance(v, typ) else default


def _token(kv: dict[str, object], tokens: object, which: str) -> str | None:
    tid = kv.get(f"tokenizer.ggml.{which}_token_id")
    if isinstance(tid, int) and isinstance(tokens, list) and 0 <= tid < len(tokens) and isinstance(tokens[tid], str):
        return tokens[tid]
    return None

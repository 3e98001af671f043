"""Property-based fuzzing of the GGUF reader: Hypothesis builds hostile headers, the reader must cope.

Two kinds of input: GGUF files built field by field (every value type, arrays and nested arrays,
strings and counts that may lie, tensor infos with odd shapes, types and offsets), and mutations of a
real file written by ``tests/helpers/ggufs.py`` (overwritten counts, byte flips, cuts, repeated and
deleted ranges). The property: ``inspect_file`` and ``inspect_header`` either return a ``ModelInfo``
that serializes the way the library stores it, or raise ``InvalidModelFile``, within ``TIME_BOUND_S``;
anything else is a crash.

Run it in its own process (``python -m tests.helpers.gguf_fuzz``): ``limit_memory`` caps the address
space there, so an allocation bomb becomes a ``MemoryError`` (a crash) instead of swapping the machine.
Every crash is saved under ``REGRESSIONS`` as a ``.gguf`` file that ``tests/engine/models/test_gguf_fuzz.py``
replays. ``fuzz/fuzz_gguf.py`` runs the same property for longer.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import struct
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from fireside.engine.errors import InvalidModelFile
from fireside.engine.library.index import info_to_json
from fireside.engine.models.inspection import inspect_file, inspect_header

REGRESSIONS = Path(__file__).resolve().parents[1] / "engine/regressions/gguf"
TIME_BOUND_S = 1.0  # one inspection of one input (they are at most a few hundred KB)
EXTRA_MEMORY = 1 << 30  # bytes a fuzzing process may allocate past what it held at start

U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
_SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<B",
           U64: "<Q", I64: "<q", F64: "<d"}
_EDGES = [0, 1, 2, 3, 4, 31, 32, 33, 64, 255, 256, 4096, 65535, 65536, 1 << 20, 1 << 24, (1 << 31) - 1,
          1 << 31, (1 << 32) - 1, 1 << 32, 1 << 40, 1 << 62, (1 << 63) - 1, 1 << 63, (1 << 64) - 1]
KEYS = ["general.architecture", "general.alignment", "general.name", "general.file_type",
        "llama.block_count", "llama.context_length", "llama.embedding_length", "llama.feed_forward_length",
        "llama.attention.head_count", "llama.attention.head_count_kv", "llama.attention.key_length",
        "llama.attention.value_length", "llama.attention.sliding_window", "llama.expert_count",
        "llama.expert_used_count", "tokenizer.ggml.tokens", "tokenizer.ggml.bos_token_id",
        "tokenizer.ggml.eos_token_id", "tokenizer.chat_template", "split.count", "split.no"]
TENSOR_NAMES = ["token_embd.weight", "output.weight", "output_norm.weight", "blk.0.attn_q.weight",
                "blk.1.attn_k.weight", "blk.99999999999999999999.ffn_up.weight", "blk.-1.x"]


def _fits(value: int, fmt: str) -> int:
    bits = struct.calcsize(fmt) * 8
    if fmt[1].islower():  # signed
        return (value + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))
    return value % (1 << bits)


def u32(v: int) -> bytes:
    return struct.pack("<I", v % (1 << 32))


def u64(v: int) -> bytes:
    return struct.pack("<Q", v % (1 << 64))


# Strategies are built once, here: building them inside each draw costs Hypothesis more than the
# inspection it feeds.
_EDGE_INTS = st.one_of(st.sampled_from(_EDGES), st.integers(-(1 << 64), 1 << 64), st.integers(0, 300))


def _scalar(vtype: int) -> st.SearchStrategy[bytes]:
    fmt = _SCALAR[vtype]
    if vtype in (F32, F64):
        floats = st.floats(allow_nan=True, allow_infinity=True, width=32 if vtype == F32 else 64)
        return floats.map(lambda x: struct.pack(fmt, x))
    return _EDGE_INTS.map(lambda n: struct.pack(fmt, _fits(n, fmt)))


_LIE = st.one_of(st.none(), st.none(), st.none(), st.sampled_from(_EDGES))  # a count that may not match
_TEXT = st.one_of(st.binary(max_size=40), st.sampled_from([b"llama", b"", b"<s>"]))
UNKNOWN = st.binary(max_size=16)


def _values(depth: int, lie: st.SearchStrategy) -> dict[int, st.SearchStrategy[bytes]]:
    """Each value type's encoded values, with string lengths and array counts from ``lie`` (None:
    the true one); arrays nest two deep (GGUF readers refuse any nesting)."""
    values = {t: _scalar(t) for t in _SCALAR}
    values[STRING] = st.tuples(_TEXT, lie).map(lambda t: u64(len(t[0]) if t[1] is None else t[1]) + t[0])
    if depth < 2:
        inner = _values(depth + 1, lie)
        items = [U8, I32, U32, F32, STRING, BOOL, U64, ARRAY] if depth < 1 else [U32, STRING, ARRAY]
        values[ARRAY] = st.one_of([
            st.tuples(st.just(item), st.lists(inner[item], max_size=6), lie).map(
                lambda t: u32(t[0]) + u64(len(t[1]) if t[2] is None else t[2]) + b"".join(t[1]))
            for item in items if item in inner])
    else:
        values[ARRAY] = st.just(u32(U32) + u64(0))
    return values


VALUES = _values(0, _LIE)
HONEST = _values(0, st.none())
_KEY_BYTES = st.one_of(st.sampled_from([k.encode() for k in KEYS]), st.binary(max_size=12))
KV_ENTRIES = st.one_of(
    [st.tuples(_KEY_BYTES, st.just(t), VALUES[t]) for t in (U32, U64, I32, STRING, ARRAY, F32, F64, BOOL, U8, I64)]
    + [st.tuples(_KEY_BYTES, st.sampled_from([13, 99, 1 << 31, (1 << 32) - 1]), UNKNOWN)]
).map(lambda t: u64(len(t[0])) + t[0] + u32(t[1]) + t[2])
_DIMS = st.one_of(st.sampled_from([1, 32, 64, 256]), st.sampled_from([1, 32, 64, 256]), st.sampled_from(_EDGES))
_NAMES = st.one_of(st.sampled_from([n.encode() for n in TENSOR_NAMES]), st.binary(max_size=8))
TENSORS = st.tuples(_NAMES, st.lists(_DIMS, min_size=1, max_size=4) | st.lists(_DIMS, max_size=6), _LIE,
                    st.one_of(st.sampled_from([0, 1, 8, 2, 12]), st.integers(0, 1 << 32)),
                    st.one_of(st.sampled_from([0, 32, 128, 4096]), st.sampled_from(_EDGES))).map(
    lambda t: u64(len(t[0])) + t[0] + u32(len(t[1]) if t[2] is None else t[2]) + b"".join(u64(d) for d in t[1])
    + u32(t[3]) + u64(t[4]))
_ARCH = u64(20) + b"general.architecture" + u32(STRING) + u64(5) + b"llama"
# The numbers a summary is built from, mostly as the uint32 they should be, now and then as a float
# (NaN, infinity), a string or an array: the kinds of value that reach the arithmetic.
_TYPED_NUMBER = st.one_of([HONEST[t].map(lambda v, t=t: u32(t) + v)
                           for t in (U32, U32, U32, U64, I32, F32, F64, STRING, ARRAY)])
_NUMBER_KEYS = [k.encode() for k in KEYS if k.startswith(("llama.", "tokenizer.ggml.b", "tokenizer.ggml.e"))
                and k != "llama.block_count"]
SUMMARY_KVS = st.lists(st.tuples(st.sampled_from(_NUMBER_KEYS), _TYPED_NUMBER), max_size=6,
                       unique_by=lambda t: t[0]).map(lambda kvs: [u64(len(k)) + k + v for k, v in kvs])


@st.composite
def built_files(draw) -> bytes:
    """A GGUF file written field by field; most fields honest, any of them possibly hostile."""
    kvs = draw(st.lists(KV_ENTRIES, max_size=4))
    if draw(st.integers(0, 3)) < 3:  # most look real: an architecture, a block count and a few numbers
        kvs = [_ARCH, u64(17) + b"llama.block_count" + draw(_TYPED_NUMBER)] + draw(SUMMARY_KVS) + kvs
    tensors = draw(st.lists(TENSORS, max_size=4))
    corrupt = draw(st.integers(0, 15))  # now and then, one of the fixed fields is wrong
    magic = draw(st.binary(min_size=4, max_size=4)) if corrupt == 1 else b"GGUF"
    version = draw(st.integers(0, 1 << 32)) if corrupt == 2 else draw(st.sampled_from([2, 3]))
    n_tensors = draw(st.sampled_from(_EDGES)) if corrupt == 3 else len(tensors)
    n_kv = draw(st.sampled_from(_EDGES)) if corrupt == 4 else len(kvs)
    header = magic + u32(version) + u64(n_tensors) + u64(n_kv) + b"".join(kvs) + b"".join(tensors)
    pad = (-len(header)) % 32
    return header + b"\0" * pad + b"\0" * draw(st.sampled_from([0, 128, 4096, 65536]))


def mutated_files(good: bytes, header_size: int) -> st.SearchStrategy[bytes]:
    """A real file with one to four edits, mostly inside its header."""

    @st.composite
    def mutated(draw) -> bytes:  # a closure, so Hypothesis never prints the whole file as an argument
        data = bytearray(good)
        for _ in range(draw(st.integers(1, 4))):
            if not data:
                break
            at = draw(st.integers(0, min(header_size, len(data) - 1) if draw(st.integers(0, 9)) else len(data) - 1))
            _edit(draw, data, at)
        return bytes(data)

    return mutated()


def _edit(draw, data: bytearray, at: int) -> None:
    op = draw(st.sampled_from(["u32", "u64", "byte", "cut", "insert", "delete", "repeat"]))
    if op in ("u32", "u64"):
        width = 4 if op == "u32" else 8
        data[at:at + width] = (u32 if width == 4 else u64)(draw(st.sampled_from(_EDGES)))
    elif op == "byte":
        data[at:at + 1] = bytes([draw(st.integers(0, 255))])
    elif op == "cut":
        del data[at:]
    elif op == "insert":
        data[at:at] = draw(st.binary(min_size=1, max_size=16))
    else:
        n = draw(st.integers(1, 256))
        chunk = bytes(data[at:at + n])
        data[at:at + n] = chunk * 2 if op == "repeat" else b""


def good_file(folder: Path) -> tuple[bytes, int]:
    """A real TINY model's bytes and its header size."""
    from tests.helpers.gguf_builder import TINY, write_model

    path = write_model(folder / "good.gguf", TINY, chat_template="{% for m in messages %}{{ m }}{% endfor %}")
    return path.read_bytes(), inspect_file(path).header_size


def check(data: bytes, path: Path) -> float:
    """Inspect ``data`` as a file and as a fetched header; the seconds taken. Raises on a crash."""
    path.write_bytes(data)
    started = time.perf_counter()
    for inspect in (lambda: inspect_file(path), lambda: inspect_header(data, "fuzz", len(data))):
        try:
            info = inspect()
        except InvalidModelFile:
            continue
        info_to_json(info)  # what the library stores
        json.dumps(info.to_dict())  # what `fireside ls --json` and the server send
    return time.perf_counter() - started


def save(data: bytes, folder: Path = REGRESSIONS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"crash-{hashlib.sha256(data).hexdigest()[:16]}.gguf"
    path.write_bytes(data)
    return path


@dataclass
class Report:
    inputs: int = 0
    seconds: float = 0.0
    crashes: int = 0
    distinct: list[dict] = field(default_factory=list)  # one per kind of crash: error, where, saved file
    slowest_s: float = 0.0
    slowest_sha: str = ""


class Fuzzer:
    """Feeds Hypothesis's inputs through ``check``; counts every input, saves one file per kind of
    crash (its exception and the line that raised it) and keeps the run going after a crash."""

    def __init__(self, folder: Path, save_to: Path | None = None):
        self.path, self.save_to = folder / "fuzz.gguf", save_to
        good, header_size = good_file(folder)
        self.strategies = {"built": built_files(), "mutated": mutated_files(good, header_size)}
        self.report = Report()

    def batch(self, examples: int, seed_value: int, derandomize: bool = False) -> Report:
        """``examples`` inputs of each kind."""
        started = time.perf_counter()
        config = settings(max_examples=examples, deadline=None, database=None, derandomize=derandomize,
                          suppress_health_check=list(HealthCheck))
        for strategy in self.strategies.values():

            def fuzz_gguf(data: bytes) -> None:
                self.check(data)

            seed(seed_value)(config(given(strategy)(fuzz_gguf)))()
        self.report.seconds += time.perf_counter() - started
        return self.report

    def check(self, data: bytes) -> None:
        self.report.inputs += 1
        try:
            took = check(data, self.path)
        except Exception as exc:
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            self._crash(data, f"{type(exc).__name__}: {str(exc)[:160]}",
                        f"{type(exc).__name__} at {Path(frame.filename).name}:{frame.lineno}")
            return
        if took > self.report.slowest_s:
            self.report.slowest_s, self.report.slowest_sha = took, hashlib.sha256(data).hexdigest()[:16]
        if took > TIME_BOUND_S:
            self._crash(data, f"inspection took {took:.2f} s", "slow")

    def _crash(self, data: bytes, error: str, kind: str) -> None:
        self.report.crashes += 1
        if any(d["kind"] == kind for d in self.report.distinct):
            return
        saved = save(data, self.save_to) if self.save_to else None
        self.report.distinct.append({"kind": kind, "error": error, "file": str(saved) if saved else None})


def run(examples: int, seed_value: int = 0, save_to: Path | None = None, derandomize: bool = False) -> Report:
    with tempfile.TemporaryDirectory() as tmp:
        return Fuzzer(Path(tmp), save_to).batch(examples, seed_value, derandomize)


def replay(folder: Path) -> list[dict]:
    """Every regression file through the property; the failures."""
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in sorted(folder.glob("*.gguf")):
            try:
                took = check(path.read_bytes(), Path(tmp) / "replay.gguf")
            except Exception as exc:
                failures.append({"file": path.name, "error": f"{type(exc).__name__}: {str(exc)[:200]}"})
                continue
            if took > TIME_BOUND_S:
                failures.append({"file": path.name, "error": f"took {took:.2f} s"})
    return failures


def limit_memory(extra: int = EXTRA_MEMORY) -> int:
    """Cap this process's address space at what it holds now plus ``extra``; the cap, or 0 where the
    platform has no such limit (Windows)."""
    try:
        import resource
    except ImportError:
        return 0
    try:
        with open("/proc/self/status") as fh:
            vm = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmSize:"))
    except OSError:
        return 0  # macOS: no /proc, and RLIMIT_AS is not enforced there anyway
    cap = vm + extra
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))
    return cap


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", type=int, default=200, help="inputs of each kind")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--replay", type=Path, help="replay the .gguf files in this folder instead")
    p.add_argument("--save", type=Path, help="save crashes in this folder")
    p.add_argument("--derandomize", action="store_true", help="the same inputs on every run (for CI)")
    args = p.parse_args(argv)
    cap = limit_memory()
    if args.replay:
        print(json.dumps({"failures": replay(args.replay), "memory_cap": cap}))
        return 0
    report = run(args.examples, args.seed, save_to=args.save, derandomize=args.derandomize)
    print(json.dumps({**report.__dict__, "memory_cap": cap}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

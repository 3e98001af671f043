"""Images inside the runner: the vision projector (llama.cpp's mtmd), image chunks in a prompt, and
their evaluation into a slot's sequence.

``Projector`` loads an ``mmproj`` GGUF beside the text model (``mtmd_init_from_file``). The tokenizer
thread turns a prompt whose segments hold ``types.Image`` objects into tokens with ``tokenize``: text
as ``tokens.py`` does, and each image through ``mtmd_tokenize`` of the media marker alone, so a
model's own tokens around an image (Gemma's ``<start_of_image>``, SmolVLM's tile tags) come with it.
An image chunk takes as many places in the slot's token list as it takes positions in the sequence,
each an *image token*: a negative number drawn from the image's digest (the hash of its decoded pixels)
and its place in the image. A real token is never negative, so the batch engine's prefix matching works
unchanged: the next turn of a conversation with the same image shares its prefix (the image is not
encoded again), another image differs at its first place, and the prompt cache on disk keeps the same
list. Most projectors give an image one position per embedding; those of models that place image
embeddings by 2-D positions (M-RoPE: Qwen2-VL and kin) give a grid of ``nx`` by ``ny`` embeddings the
positions ``max(nx, ny)`` and the text after it the next one, as llama.cpp's mtmd does. So a place in
the token list is always a position, and a slot's positions, prefix reuse, ``seq_rm`` and saved states
need no other map; only the KV cells an image fills (``cells``, one per embedding) can outnumber its
places, and the context checks count those (``extra_cells``).

The batch engine (``batch.py``) calls ``evaluate`` on its worker thread when a slot's prompt reaches an
image: the chunk is encoded (the vision tower and projector) and its embeddings decoded into the
slot's sequence at its positions (``mtmd_helper_decode_image_chunk``, which handles non-causal
attention and M-RoPE positions where the model needs them), in a ``llama_decode`` of its own between
two steps of the batch: the other slots' streams wait for that one call, as they do in llama-server.
Text before and after an image goes in the shared batch as usual.

A chat sends its images again with every turn: the tokenizer keeps the chunks of the last
``RECENT_IMAGES`` images it read, by digest, and copies them for an image it has seen instead of
preprocessing it again (resizing and normalizing, in ``mtmd_tokenize``).

Threading: ``tokenize`` (and its recent chunks) runs on the tokenizer thread (mtmd's tokenizer reads the
vocabulary and the image preprocessor, as llama-server's HTTP threads do); ``evaluate`` on the worker
thread only.
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from ..types import Image
from .tokens import tokenize as tokenize_text

IMAGE_TOKEN_SPACE = 2**31 - 2  # image tokens are -1 down to -(2**31 - 1)
RECENT_IMAGES = 4  # images whose mtmd chunks the tokenizer keeps (a chat sends its images again every turn)


@dataclass
class ImageChunk:
    """One image of a prompt: mtmd's chunk (owned here), its place and length (positions) in the token
    list, and the KV cells (embeddings) it fills."""

    chunk: Any
    start: int
    places: int
    cells: int
    digest: str
    freed: bool = field(default=False, repr=False)

    def free(self) -> None:
        import llama_cpp.mtmd_cpp as mtmd

        if not self.freed:
            self.freed = True
            mtmd.mtmd_input_chunk_free(self.chunk)


def image_tokens(digest: str, n: int) -> list[int]:
    """The ``n`` image tokens standing for image ``digest`` in a slot's token list."""
    base = int(digest[:16], 16)
    return [-1 - (base + i) % IMAGE_TOKEN_SPACE for i in range(n)]


class Projector:
    """A loaded ``mmproj``, tied to the runner's text model. Made and freed on the worker thread."""

    def __init__(self, path: str, llama: Any, n_threads: int, use_gpu: bool, flash_attn: bool):
        import llama_cpp
        import llama_cpp.mtmd_cpp as mtmd

        params = mtmd.mtmd_context_params_default()
        params.use_gpu, params.print_timings, params.n_threads = use_gpu, False, n_threads
        params.flash_attn_type = (llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash_attn
                                  else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED)
        self.ctx = mtmd.mtmd_init_from_file(path.encode(), llama.model, params)
        if not self.ctx:
            raise RuntimeError(f"llama.cpp could not load the vision projector {path} for this model "
                               "(see the runner log: a projector made for another model, or a newer type)")
        if not mtmd.mtmd_support_vision(self.ctx):
            self.close()
            raise RuntimeError(f"{path} is not a vision projector (it has no image encoder)")
        self.marker = mtmd.mtmd_default_marker()
        # (digest, add_bos) -> mtmd's chunks for the image, as tokenized: the next turn of a conversation
        # copies them instead of preprocessing the image again (2.5 ms for a 320x240 one into a 224-pixel
        # tower; a large photo into a tiling projector, tens of ms, for each image of the chat, each turn)
        self._recent: OrderedDict[tuple[str, bool], Any] = OrderedDict()

    def close(self) -> None:
        import llama_cpp.mtmd_cpp as mtmd

        while self._recent:
            mtmd.mtmd_input_chunks_free(self._recent.popitem()[1])
        if self.ctx:
            mtmd.mtmd_free(self.ctx)
            self.ctx = None

    # --- tokenizer thread ------------------------------------------------------------------------
    def tokenize(self, llama: Any, prompt: list, add_bos: bool) -> tuple[list[int], list[ImageChunk]]:
        """The tokens of a prompt of text segments and images, and its image chunks (the caller frees
        them, or hands them to the batch engine that does)."""
        tokens: list[int] = []
        images: list[ImageChunk] = []
        try:
            for part in prompt:
                if isinstance(part, Image):
                    self._image(llama, part, tokens, images, add_bos and not tokens)
                elif part[0]:
                    tokens += tokenize_text(llama, part[0].encode("utf-8"), add_bos and not tokens, bool(part[1]))
        except BaseException:
            for image in images:
                image.free()
            raise
        return tokens, images

    def _image(self, llama: Any, image: Image, tokens: list[int], images: list[ImageChunk], add_bos: bool) -> None:
        import llama_cpp.mtmd_cpp as mtmd

        key = (image.digest, add_bos)
        chunks = self._recent.get(key)
        if chunks is None:
            chunks = self._chunks(image, add_bos)
            self._recent[key] = chunks
            if len(self._recent) > RECENT_IMAGES:
                mtmd.mtmd_input_chunks_free(self._recent.popitem(last=False)[1])
        else:
            self._recent.move_to_end(key)
        tiles = 0  # a model that cuts an image in tiles has one chunk a tile
        for i in range(mtmd.mtmd_input_chunks_size(chunks)):
            tiles += self._chunk(mtmd.mtmd_input_chunks_get(chunks, i), image, tiles, tokens, images)

    def _chunks(self, image: Image, add_bos: bool) -> Any:
        """mtmd's chunks for the image alone (the marker, with the model's own tokens around it); owned
        by the caller."""
        import llama_cpp.mtmd_cpp as mtmd

        pixels = (ctypes.c_uint8 * len(image.pixels)).from_buffer_copy(image.pixels)
        bitmap = mtmd.mtmd_bitmap_init(image.width, image.height, pixels)
        if not bitmap:
            raise ValueError(f"llama.cpp refused a {image.width}x{image.height} image")
        chunks = mtmd.mtmd_input_chunks_init()
        try:
            mtmd.mtmd_bitmap_set_id(bitmap, image.digest.encode())
            text = mtmd.mtmd_input_text()
            text.text, text.text_len = self.marker, len(self.marker)
            text.add_special, text.parse_special = add_bos, True
            array = (mtmd.mtmd_bitmap_p_ctypes * 1)(bitmap)
            rc = mtmd.mtmd_tokenize(self.ctx, chunks, ctypes.byref(text), array, 1)
            if rc != 0:
                raise ValueError(f"llama.cpp could not read a {image.width}x{image.height} image (mtmd_tokenize {rc})")
        except BaseException:
            mtmd.mtmd_input_chunks_free(chunks)
            raise
        finally:
            mtmd.mtmd_bitmap_free(bitmap)
        return chunks

    @staticmethod
    def _chunk(chunk: Any, image: Image, tile: int, tokens: list[int], images: list[ImageChunk]) -> int:
        """Add one of mtmd's chunks; returns 1 for an image chunk (a tile), 0 for text."""
        import llama_cpp.mtmd_cpp as mtmd

        if mtmd.mtmd_input_chunk_get_type(chunk) == mtmd.MTMD_INPUT_CHUNK_TYPE_TEXT:
            n = ctypes.c_size_t()
            ptr = mtmd.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(n))
            tokens += [ptr[j] for j in range(n.value)]
            return 0
        places = mtmd.mtmd_input_chunk_get_n_pos(chunk)
        cells = mtmd.mtmd_input_chunk_get_n_tokens(chunk)
        digest = image.digest if tile == 0 else _tile(image.digest, tile)
        images.append(ImageChunk(mtmd.mtmd_input_chunk_copy(chunk), len(tokens), places, cells, digest))
        tokens += image_tokens(digest, places)
        return 1

    # --- worker thread ---------------------------------------------------------------------------
    def evaluate(self, ctx: Any, image: ImageChunk, seq_id: int, n_batch: int) -> None:
        """Encode ``image`` and decode its embeddings into sequence ``seq_id`` from its ``start``."""
        import llama_cpp
        import llama_cpp.mtmd_cpp as mtmd

        rc = mtmd.mtmd_encode_chunk(self.ctx, image.chunk)
        if rc != 0:
            raise RuntimeError(f"the vision projector failed to encode an image ({rc})")
        embd = mtmd.mtmd_get_output_embd(self.ctx)
        new_n_past = llama_cpp.llama_pos(0)
        rc = mtmd.mtmd_helper_decode_image_chunk(self.ctx, ctx, image.chunk, embd, image.start, seq_id, n_batch,
                                                 ctypes.byref(new_n_past), mtmd.mtmd_helper_post_decode_callback(),
                                                 None)
        if rc != 0:
            raise RuntimeError(f"llama.cpp failed to decode an image's embeddings ({rc})")
        if new_n_past.value != image.start + image.places:  # what the next text's positions rest on
            raise RuntimeError(f"llama.cpp placed an image at {image.start}..{new_n_past.value}, "
                               f"not {image.start}..{image.start + image.places}")


def _tile(digest: str, n: int) -> str:
    import hashlib

    return hashlib.sha256(f"{digest}:{n}".encode()).hexdigest()


def image_at(images: list[ImageChunk], pos: int) -> ImageChunk | None:
    """The image that starts at token ``pos``, if one does."""
    return next((i for i in images if i.start == pos), None)


def text_end(images: list[ImageChunk], start: int, end: int) -> int:
    """Where a run of text tokens from ``start`` must stop before ``end``: at the next image's start."""
    return min([end, *(i.start for i in images if start <= i.start < end)])


def whole_images(images: list[ImageChunk], keep: int) -> int:
    """``keep`` cut back to an image's start if it falls inside one: half an image is no use."""
    for image in images:
        if image.start < keep < image.start + image.places:
            return image.start
    return keep


def extra_cells(images: list[ImageChunk], upto: int | None = None) -> int:
    """The KV cells the images (those wholly before place ``upto``, or all) fill beyond their places in
    the token list: 0 but for M-RoPE projectors, whose ``nx`` by ``ny`` grid takes ``max(nx, ny)`` places."""
    return sum(i.cells - i.places for i in images if upto is None or i.start + i.places <= upto)


def counted(tokens: list[int], images: list[ImageChunk]) -> list[int]:
    """``tokens`` with each image's places widened to its cells: a list whose length is what the prompt
    fills of the context (what a ``tokenize`` request counts)."""
    out, at = [], 0
    for image in images:  # in prompt order, as tokenize made them
        out += tokens[at:image.start] + image_tokens(image.digest, image.cells)
        at = image.start + image.places
    return out + tokens[at:]


def free(images: list[ImageChunk] | None) -> None:
    for image in images or ():
        image.free()


def evaluate_due(engine: Any) -> None:
    """Evaluate every image a prefilling slot of ``engine`` (a ``BatchEngine``) has reached: its text
    before the image is in the cache, so the image goes in next, at its own positions. A failed image
    ends that request only."""
    for slot in engine.slots:
        seq = slot.seq
        while seq is not None and seq.next_token is None:
            image = image_at(seq.images, len(slot.tokens))
            if image is None:
                break
            try:
                engine.projector.evaluate(engine.ctx, image, slot.seq_id, engine.n_batch)
            except RuntimeError as exc:
                engine._release(slot, None, error=str(exc))
                break
            slot.tokens += seq.prompt[image.start:image.start + image.places]

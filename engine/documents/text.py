"""Plain text, Markdown and source code: read streamed under a cap, refused when the bytes are binary,
and split into blocks (Markdown by its headings, paragraphs and fenced code; source code by its
top-level definitions; plain text by its paragraphs)."""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import DocumentRejected
from .document import Block, Document, Outline
from .limits import MAX_CONTROL_RATIO, MAX_TEXT_BYTES, READ_BLOCK, SNIFF_BYTES

_BOMS = ((b"\xef\xbb\xbf", "utf-8-sig"), (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16"))
_CONTROL = set(range(0, 9)) | {11, 12} | set(range(14, 32)) | {127}


def read_bytes_capped(path: Path, cap: int, what: str) -> bytes:
    """The file's bytes, read ``READ_BLOCK`` at a time; past ``cap`` it stops and refuses the file."""
    try:
        size = path.stat().st_size
        if size > cap:
            raise _too_large(path, size, cap, what)
        parts, total = [], 0
        with open(path, "rb") as fh:
            while block := fh.read(READ_BLOCK):
                total += len(block)
                if total > cap:
                    raise _too_large(path, total, cap, what)
                parts.append(block)
        return b"".join(parts)
    except OSError as e:
        raise DocumentRejected(f"{path.name} cannot be read: {e.strerror or e}", "missing", str(path)) from e


def _too_large(path: Path, size: int, cap: int, what: str) -> DocumentRejected:
    return DocumentRejected(f"{path.name} is over {cap // (1024 * 1024)} MB ({size:,} bytes or more); Fireside reads "
                            f"{what} up to {cap // (1024 * 1024)} MB", "too_large", str(path))


def decode_text(data: bytes, path: Path) -> str:
    """Text from bytes: a BOM is honoured; otherwise UTF-8, then Windows-1252. Binary data (NUL bytes or
    many control characters in the first ``SNIFF_BYTES``, outside a UTF-16 BOM) is refused."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return data.decode(codec, errors="replace")
    sniff = data[:SNIFF_BYTES]
    controls = sum(1 for b in sniff if b in _CONTROL)
    if b"\x00" in sniff or (sniff and controls / len(sniff) > MAX_CONTROL_RATIO):
        raise DocumentRejected(f"{path.name} holds binary data, not text (is it really a {path.suffix or 'text'} "
                               "file?)", "binary", str(path))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace")


def read_plain(path: Path) -> Document:
    text = decode_text(read_bytes_capped(path, MAX_TEXT_BYTES, "text files"), path)
    return Document(str(path), "text", _paragraphs(text, ()))


def _paragraphs(text: str, headings: tuple[str, ...], kind: str = "paragraph") -> list[Block]:
    return [Block(kind, p.strip("\n"), headings=headings) for p in re.split(r"\n\s*\n", text) if p.strip()]


_ATX = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


def read_markdown(path: Path) -> Document:
    text = decode_text(read_bytes_capped(path, MAX_TEXT_BYTES, "Markdown files"), path)
    return Document(str(path), "markdown", markdown_blocks(text))


def markdown_blocks(text: str) -> list[Block]:
    """Blocks from Markdown: ATX headings (``#``) open sections, fenced code stays one block, and the
    lines between are split into paragraphs at blank lines."""
    blocks: list[Block] = []
    outline, para, fence = Outline(), [], None

    def flush() -> None:
        if "".join(para).strip():
            blocks.extend(_paragraphs("\n".join(para), outline.path))
        para.clear()

    for line in text.splitlines():
        if fence is not None:
            fence.append(line)
            if _FENCE.match(line):
                blocks.append(Block("code", "\n".join(fence), headings=outline.path))
                fence = None
        elif _FENCE.match(line):
            flush()
            fence = [line]
        elif m := _ATX.match(line):
            flush()
            title = m.group(2).strip()
            blocks.append(Block("heading", title, level=len(m.group(1)), headings=outline.heading(len(m.group(1)), title)))
        else:
            para.append(line)
    flush()
    if fence:  # an unclosed fence runs to the end of the file
        blocks.append(Block("code", "\n".join(fence), headings=outline.path))
    return blocks


# A top-level definition in the common languages: Python, JavaScript/TypeScript, Rust, Go, C-like, shell.
_DEFINITION = re.compile(r"^(?:async\s+def|def|class|function|export\s+\w+|fn|pub\s+fn|func|impl|struct|enum|"
                         r"interface|type|const|module|package)\b")


def read_code(path: Path) -> Document:
    """Source code: split before each top-level definition, named by its first line, so a chunk knows
    which function or class it is in."""
    text = decode_text(read_bytes_capped(path, MAX_TEXT_BYTES, "source files"), path)
    blocks: list[Block] = []
    current: list[str] = []
    name = path.name

    def flush() -> None:
        if "".join(current).strip():
            blocks.append(Block("code", "\n".join(current).strip("\n"), headings=(path.name,) if name == path.name
                                else (path.name, name)))
        current.clear()

    for line in text.splitlines():
        if _DEFINITION.match(line):
            flush()
            name = line.strip().rstrip("{:").strip()[:120]
        current.append(line)
    flush()
    return Document(str(path), "code", blocks)

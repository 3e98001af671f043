"""Which model embeds documents: one choice for this machine, kept in the config folder
(``documents.json``), so the app's Settings, ``fireside serve`` and the app's own server agree on it.

Until a choice is kept, the built-in embedder (``DEFAULT``: all-MiniLM-L6-v2, installed with Fireside,
``library/minilm.py``) embeds them. None (chosen in Settings, or ``--embedder none``) means no vectors:
passages are found by keywords alone (BM25), and searches say so. Any model that embeds may be chosen (a dedicated embedder such as all-MiniLM, bge or nomic-embed is much
better at it than a chat model; ``ModelInfo.embeds_only`` tells them apart). Changing it re-embeds every
index in the background (``Collections.use_embedder``, ``DocumentIndex.use``).
"""

from __future__ import annotations

import json
import logging

from ..fsutil import atomic_write
from ..settings import Settings
from .index import Embedder

log = logging.getLogger(__name__)

FILE = "documents.json"
DEFAULT = "minilm"  # the built-in embedder's library id (library/minilm.py's EMBEDDER_ID)


def chosen_embedder(settings: Settings) -> str | None:
    """The model id chosen to embed documents: ``DEFAULT`` until a choice is kept, None where keywords alone
    (BM25) were chosen; an unreadable file counts as none."""
    try:
        saved = json.loads((settings.config_dir / FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return DEFAULT
    except (OSError, ValueError) as exc:
        log.warning("ignoring unreadable %s: %s", settings.config_dir / FILE, exc)
        return None
    if isinstance(saved, dict) and "embedder" not in saved:
        return DEFAULT
    model = saved.get("embedder") if isinstance(saved, dict) else None
    return model if isinstance(model, str) and model else None


def choose_embedder(settings: Settings, model_id: str | None) -> None:
    """Keep ``model_id`` (None: BM25 alone) as the model that embeds documents."""
    settings.config_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(settings.config_dir / FILE, json.dumps({"embedder": model_id or None}, indent=2).encode())


def embedder_for(engine, model_id: str | None) -> Embedder | None:
    """The ``Embedder`` for ``model_id`` through ``engine`` (an ``Engine`` or ``Runtime``), or None."""
    return Embedder.from_engine(engine, model_id) if model_id else None

"""Where Fireside keeps things and how it is configured: every path and environment lookup lives here.

One ``Settings`` value is built at start-up (``Settings.from_env()``) and passed down; nothing else in
the engine reads the environment or calls platformdirs. Tests point the whole app at a temporary folder
by setting ``FIRESIDE_HOME`` (or by building ``Settings(home=tmp_path)``).

Environment variables:
    FIRESIDE_HOME     one folder for everything (data, config, cache, models); handy for tests and
                      portable installs
    FIRESIDE_MODELS   the models folders, separated by os.pathsep (first one receives downloads)
    FIRESIDE_HOST     the API server's bind address (default 127.0.0.1)
    FIRESIDE_PORT     the API server's port (default 8765)
    HF_ENDPOINT       the Hugging Face hub (or a mirror); read by huggingface_hub too
    HF_TOKEN          a hub token for this session, used when the OS keyring holds none
    FIRESIDE_PROMPT_CACHE      ``off`` keeps no KV state on disk (the prompt cache; on by default)
    FIRESIDE_PROMPT_CACHE_GIB  the prompt cache's size cap in GiB (default 4)
    FIRESIDE_GPU_BUDGET_GIB    the most memory the planner uses on each GPU (default: all that is free);
                               the load option ``gpu_budget_gib`` and ``--gpu-budget-gib`` win over it
    FIRESIDE_RAM_BUDGET_GIB    the most of this machine's memory the planner uses (default: all that is free);
                               ``ram_budget_gib`` and ``--ram-budget-gib`` win over it
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import platformdirs

APP_NAME = "Fireside"
DEFAULT_PORT = 8765
SHARE_PORT = 8766  # the shared listener's (``fireside serve --share``, the app's Share switch)
DEFAULT_HOST = "127.0.0.1"
DEFAULT_HF_ENDPOINT = "https://huggingface.co"
DEFAULT_PROMPT_CACHE_GIB = 4.0


def redact(secret: str | None) -> str | None:
    """How a secret appears in any repr, str or log line: that it is set, never what it is."""
    return None if secret is None else "<redacted>"


class Secret(str):
    """A token that is still a ``str`` for the code that sends it, but whose repr (the form a dict,
    a dataclass, a traceback's locals and ``%r`` in a log line use) says only that it is set."""

    def __repr__(self) -> str:
        return "'<redacted>'"


def _gib(value: str | None) -> float | None:
    if not value:
        return None
    try:
        gib = float(value)
    except ValueError:
        raise ValueError(f"FIRESIDE_GPU_BUDGET_GIB must be a number of GiB, not {value!r}") from None
    if gib < 0:
        raise ValueError(f"FIRESIDE_GPU_BUDGET_GIB must not be negative ({value})")
    return gib


def secret(value: str | None) -> Secret | None:
    return None if value is None else Secret(value)


@dataclass(repr=False)
class Settings:
    """Paths and switches for one Fireside process; cheap to build, safe to copy. Its repr (and so
    any log line or traceback that shows it) never carries the hub token."""

    data_dir: Path
    config_dir: Path
    cache_dir: Path
    models_dirs: list[Path]
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    hf_endpoint: str = DEFAULT_HF_ENDPOINT
    idle_ttl_s: float = 600.0
    hf_token: str | None = None
    prompt_cache: bool = True  # keep slots' KV states on disk so conversations resume after a restart
    prompt_cache_cap_bytes: int = int(DEFAULT_PROMPT_CACHE_GIB * 2**30)
    attention_calibration: bool = True  # measure which attention decodes fastest after a first load (runtime/attention.py)
    gpu_budget_gib: float | None = None  # a cap on the device memory the planner uses (None: what is free)
    ram_budget_gib: float | None = None  # a cap on the host memory the planner uses (None: what is free)
    extra: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Settings:
        env = dict(os.environ if environ is None else environ)
        home = env.get("FIRESIDE_HOME")
        if home:
            root = Path(home).expanduser()
            data, config, cache = root / "data", root / "config", root / "cache"
            default_models = root / "models"
        else:
            data = Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))
            config = Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))
            cache = Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False))
            default_models = data / "models"
        models_env = env.get("FIRESIDE_MODELS")
        models = [Path(p).expanduser() for p in models_env.split(os.pathsep) if p] if models_env else [default_models]
        return cls(
            data_dir=data,
            config_dir=config,
            cache_dir=cache,
            models_dirs=models,
            host=env.get("FIRESIDE_HOST", DEFAULT_HOST),
            port=int(env.get("FIRESIDE_PORT", DEFAULT_PORT)),
            hf_endpoint=env.get("HF_ENDPOINT", DEFAULT_HF_ENDPOINT).rstrip("/"),
            hf_token=secret(env.get("HF_TOKEN") or None),
            prompt_cache=env.get("FIRESIDE_PROMPT_CACHE", "on").strip().lower() not in ("off", "0", "no", "false"),
            prompt_cache_cap_bytes=int(float(env.get("FIRESIDE_PROMPT_CACHE_GIB") or DEFAULT_PROMPT_CACHE_GIB)
                                       * 2**30),
            # the process's own environment too: a test run turns it off for every Settings it makes
            attention_calibration=(env.get("FIRESIDE_ATTENTION_CALIBRATION")
                                   or os.environ.get("FIRESIDE_ATTENTION_CALIBRATION", "on")).strip().lower()
            not in ("off", "0", "no", "false"),
            gpu_budget_gib=_gib(env.get("FIRESIDE_GPU_BUDGET_GIB")),
            ram_budget_gib=_gib(env.get("FIRESIDE_RAM_BUDGET_GIB")),
        )

    def __repr__(self) -> str:
        shown = {f: getattr(self, f) for f in self.__dataclass_fields__}
        shown["hf_token"] = redact(self.hf_token)
        return f"Settings({', '.join(f'{k}={v!r}' for k, v in shown.items())})"

    @property
    def models_dir(self) -> Path:
        """The first models folder: downloads land here."""
        return self.models_dirs[0]

    @property
    def library_db(self) -> Path:
        return self.data_dir / "library.sqlite3"

    @property
    def chats_db(self) -> Path:
        return self.data_dir / "chats.sqlite3"

    @property
    def knowledge_dir(self) -> Path:
        """Uploaded files, knowledge collections and their indexes (``documents/collections.py``): the
        API's ``/v1/files`` and vector stores. User data, never a cache."""
        return self.data_dir / "knowledge"

    @property
    def prompt_cache_dir(self) -> Path:
        """Saved KV states of conversations (``engine/runner/kvcache.py``): a cache, safe to delete."""
        return self.cache_dir / "prompt-cache"

    def ensure_dirs(self) -> None:
        """Create the folders this process writes to; called once at start-up."""
        for path in (self.data_dir, self.config_dir, self.cache_dir, *self.models_dirs):
            path.mkdir(parents=True, exist_ok=True)

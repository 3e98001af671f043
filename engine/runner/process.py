"""The runner: a child process that owns one llama.cpp model and serves requests for it.

llama.cpp ends its process on some failures (GPU out of memory, failed asserts), which no Python
``try`` can catch, so each loaded model lives here, away from the app. The parent sends frames
(``load``, ``generate``, ``tokenize``, ``embed``, ``stats``, ``prompt_cache``, ``cancel``, ``threads``, ``shutdown``;
see ``protocol.py``) on stdin; replies go back on the original stdout, each tagged with the request's id.

Threads: a reader thread takes frames off the pipe and sets cancel events at once; a tokenizer
thread turns the prompts of ``generate``, ``tokenize`` and ``embed`` requests into tokens (answering
``tokenize`` itself) and only then hands them on, so a long prompt never holds up the tokens of the
streams being decoded (``tokens.py``); one worker thread owns the ``Llama``'s context. It takes requests off a queue in order and hands ``generate`` requests to
the batch engine (``batch.py``), which decodes every request in a slot together, one step at a time;
between steps the worker takes the next requests, so a new one joins the running batch (and
requests sent together share their first step: ``Gather`` in ``gather.py``). With the
prompt cache on (``kvstate.py``), a writer thread saves the slots' KV states after their replies.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..protocol import FramedPipe, PipeClosed
from .batch import BatchEngine
from .gather import Gather
from .kvstreams import sequences, slot_context
from .threads import yield_cpu

TOKENIZED = ("generate", "tokenize", "embed")  # the requests the tokenizer thread sees first
_BUFFER_RE = re.compile(r"(\S+)\s+(model|KV|compute|output|RS) buffer size\s*=\s*([\d.]+) MiB")


@contextlib.contextmanager
def model_params(extra_bufts: bool, on_progress: Any = None, devices: list[str] | None = None,
                 host_tensors: list[str] | None = None) -> Iterator[None]:
    """Around ``llama_cpp.Llama(...)``: its model is loaded with ``use_extra_bufts`` as given (off: no AMX
    or CPU-repack kernels, see healing.py), given one, ``on_progress`` as its progress callback, given
    ``devices`` (names from ``fireside hw``), offloading to those devices only, and given
    ``host_tensors`` (regexes over tensor names: a MoE model's experts, the planner's
    ``EXPERTS_PATTERN``), keeping those tensors in host memory whatever layer they are in (``Llama``
    has no parameter for any of them, so its default model params are wrapped)."""
    import llama_cpp

    from ..ggml import device_handles, host_overrides

    default_params = llama_cpp.llama_model_default_params
    handles = device_handles(devices) if devices is not None else None  # alive until the load is done
    places = host_overrides(host_tensors) if host_tensors else None  # likewise

    def params():
        p = default_params()
        p.use_extra_bufts = extra_bufts
        if on_progress is not None:
            p.progress_callback = on_progress
        if handles is not None:
            p.devices = ctypes.cast(handles, ctypes.c_void_p)
        if places is not None:
            p.tensor_buft_overrides = ctypes.cast(places, ctypes.c_void_p)
        return p

    llama_cpp.llama_cpp.llama_model_default_params = llama_cpp.llama.llama_cpp.llama_model_default_params = params
    try:
        yield
    finally:
        llama_cpp.llama_cpp.llama_model_default_params = llama_cpp.llama.llama_cpp.llama_model_default_params = default_params


class Runner:
    def __init__(self, pipe: FramedPipe):
        self.pipe = pipe
        self.llama: Any = None
        self.requests: queue.Queue[dict | None] = queue.Queue()
        self.prompts: queue.Queue[dict | None] = queue.Queue()  # for the tokenizer thread
        self.cancels: dict[str, threading.Event] = {}
        self.log_lines: list[str] = []
        self.buffers: dict[str, float] = {}
        self.lent_names: dict[str, str] = {}  # llama.cpp's name of a lending device's buffers -> rpc:NAME
        self._log_cb = None
        self.n_seq = 1
        self.batch: Any = None  # the BatchEngine, made at the first generate
        self.step_threads: Any = None  # the StepThreads (threads.py), made at the load
        self.share: int | None = None  # the cores the runtime last gave this runner
        self.cache: Any = None  # the PromptCache (kvstate.py), when the load asked for one
        self.drafting = False  # prompt-lookup drafts (drafts.py), as the load options say
        self._cache_from: tuple[str, dict] = ("", {})  # the model file and load options its identity hashes
        self.projector: Any = None  # vision.Projector, when the load named an mmproj
        self.draft_model: Any = None  # draftmodel.DraftModel, when the load named a draft model
        self.lane: Any = None  # lanes.LaneModel: the long-chat lane's context, when the load asked for one
        self.lane_batch: Any = None  # its BatchEngine, made at its first generate
        self.lane_threads: Any = None  # and its StepThreads
        self.lane_cache: Any = None  # and its prompt cache (the lane's states under an identity of their own)

    # --- pipe side -------------------------------------------------------------------------------
    def read_loop(self) -> None:
        """Runs on the reader thread until the parent goes away or says shutdown."""
        while True:
            try:
                msg = self.pipe.recv()
            except PipeClosed:
                break
            op = msg.get("op")
            if op == "cancel":
                event = self.cancels.get(msg["id"])  # a cancel for a finished request is moot
                if event is not None:
                    event.set()
            elif op == "threads":  # the runtime's share of the cores for this runner (threadbudget.py)
                self.share = msg["share"]
                for threads in (self.step_threads, self.lane_threads):
                    if threads is not None:
                        threads.share = self.share
            elif op == "shutdown":
                break
            else:
                self.cancels.setdefault(msg["id"], threading.Event())
                msg["at"] = time.monotonic()  # when it came, for Gather
                (self.prompts if op in TOKENIZED else self.requests).put(msg)
        for event in list(self.cancels.values()):  # the worker removes finished ones meanwhile
            event.set()
        self.prompts.put(None)
        self.requests.put(None)

    # --- tokenizer side --------------------------------------------------------------------------
    def tokenize_loop(self) -> None:
        """Runs on the tokenizer thread: tokenizes each prompt, in arrival order, while the worker decodes.
        Reads only the model's vocabulary (see ``tokens.py``); requests come here only once loaded."""
        from .tokens import prompt_tokens

        yield_cpu()  # on a machine with no core to spare the decode threads come first
        while (msg := self.prompts.get()) is not None:
            req_id, op = msg["id"], msg["op"]
            try:
                if op == "tokenize":
                    tokens = self._tokens(msg["text"], msg.get("add_bos", False), msg)
                    self.reply(req_id, "result", tokens=tokens)
                    self.cancels.pop(req_id, None)
                    continue
                if op == "generate":
                    started = time.perf_counter()
                    msg["tokens"] = self._tokens(msg["prompt"], msg.get("add_bos", False), msg)
                    if msg.get("prediction"):  # Predicted Outputs: plain text, the drafts' source (drafts.py);
                        # no reply is longer than the context, so no more of the prediction can be used
                        predicted = prompt_tokens(self.llama, [(msg["prediction"], False)], False)
                        msg["prediction_tokens"] = predicted[:self.llama.n_ctx()]
                    msg["tokenize_s"] = time.perf_counter() - started  # part of the time to first token
                else:  # embed: each input's length, checked against the context before any is embedded
                    msg["counts"] = [len(prompt_tokens(self.llama, text, True)) for text in msg["inputs"]]
            except Exception as exc:
                self.reply(req_id, "error", error=type(exc).__name__, message=str(exc))
                self.cancels.pop(req_id, None)
                continue
            msg["at"] = time.monotonic()  # when it is ready, for Gather
            self.requests.put(msg)

    def _tokens(self, prompt: Any, add_bos: bool, msg: dict) -> list[int]:
        """The prompt's tokens; a prompt with images (``runner/vision.py``) leaves its image chunks in
        ``msg["images"]`` for the batch engine, bar a ``tokenize`` request's (freed: only counted, so
        an image stands there for each of its embeddings)."""
        from .tokens import prompt_tokens

        if isinstance(prompt, str) or all(isinstance(s, tuple) for s in prompt):
            return prompt_tokens(self.llama, prompt, add_bos)
        if self.projector is None:
            raise ValueError("this model cannot see images: it was loaded without a vision projector")
        tokens, images = self.projector.tokenize(self.llama, prompt, add_bos)
        if msg["op"] == "generate":
            msg["images"] = images
        else:
            from .vision import counted, free

            tokens = counted(tokens, images)
            free(images)
        return tokens

    def reply(self, req_id: str, kind: str, **data: Any) -> None:
        try:
            self.pipe.send({"id": req_id, "type": kind, **data})
        except PipeClosed:
            pass

    # --- worker side -----------------------------------------------------------------------------
    def work_loop(self) -> None:
        """Runs on the worker thread: the only thread that touches ``self.llama``."""
        gather = Gather()
        while True:
            busy = any(e.busy for e in self._engines())
            for cache in self._caches():
                cache.decoding(busy)  # the prompt cache writes only between bursts of decoding
            try:  # idle: wait for work; busy: only while a burst is gathered (a timeout of 0 does not wait)
                msg = self.requests.get(timeout=self._gather_wait(gather) if busy else None)
            except queue.Empty:
                msg = False  # nothing new: run the next step
            if msg and msg.get("op") == "generate":
                gather.arrived(msg["at"], idle=not busy, others=msg.get("others"))
            if msg is None:  # shutdown: the reader has set every cancel event
                for engine in self._engines():
                    engine.step()  # each request still open ends "cancelled": a cut reply, not a crash
                for cache in self._caches():
                    cache.close()  # the states of the replies just ended reach the disk
                break
            if msg:
                self.handle(msg)
                if not self.requests.empty() or self._gather_wait(gather) > 0:
                    continue  # take every waiting request before the next step, so they join it
            if self._step():
                gather.stepped(time.monotonic())

    def _engines(self) -> list[Any]:
        return [e for e in (self.batch, self.lane_batch) if e is not None]

    def _caches(self) -> list[Any]:
        return [c for c in (self.cache, self.lane_cache) if c is not None]

    def _step(self) -> bool:
        """One step of each batch engine with work (the lane's after the model's); whether any ran."""
        stepped = False
        for engine in self._engines():
            if engine.busy:
                try:
                    engine.step()
                except Exception as exc:  # a failed step fails the requests in it, not the runner
                    engine.fail_all(f"{type(exc).__name__}: {exc}")
                stepped = True
        return stepped

    def handle(self, msg: dict) -> None:
        handlers = {"load": self.load, "generate": self.generate, "embed": self.embed, "stats": self.stats, "prompt_cache": self.prompt_cache}
        req_id = msg["id"]
        cancel = self.cancels[req_id]
        owned = False
        try:
            owned = handlers[msg["op"]](req_id, msg, cancel) is True
        except Exception as exc:  # every failure becomes an error reply for that request
            self.reply(req_id, "error", error=type(exc).__name__, message=str(exc),
                       log=self.log_lines[-8:])
        finally:
            if not owned:  # a generate stays open in the batch until it ends
                self.cancels.pop(req_id, None)

    def _capture_logs(self) -> None:
        import llama_cpp

        @llama_cpp.llama_log_callback
        def on_log(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
            line = text.decode("utf-8", errors="replace").rstrip()
            if not line:
                return
            self.log_lines = (self.log_lines + [line])[-200:]
            print(line, file=sys.stderr, flush=True)  # the runner's log file: a crash report's last words
            m = _BUFFER_RE.search(line)
            if m:
                key = f"{self.lent_names.get(m.group(1), m.group(1))} {m.group(2)}"
                self.buffers[key] = self.buffers.get(key, 0.0) + float(m.group(3))

        self._log_cb = on_log  # keep the ctypes callback alive
        llama_cpp.llama_log_set(on_log, ctypes.c_void_p(0))

    def load(self, req_id: str, msg: dict, cancel: threading.Event) -> None:
        import llama_cpp

        self._capture_logs()
        last = [0.0]

        @llama_cpp.llama_progress_callback
        def on_progress(fraction: float, user_data: ctypes.c_void_p) -> bool:
            now = time.monotonic()
            if now - last[0] >= 0.1 or fraction >= 1.0:  # sampled: about ten updates a second
                last[0] = now
                self.reply(req_id, "progress", fraction=float(fraction))
            return not cancel.is_set()  # False makes llama.cpp abandon the load

        kwargs = dict(msg["kwargs"])
        extra_bufts = bool(kwargs.pop("use_extra_bufts", True))
        tiled = bool(kwargs.pop("tiled_mm", True))
        if not tiled:  # ggml reads it at its first matrix product, and a runner loads one model: none ran yet
            os.environ["GGML_CPU_TILED_MM"] = "0"
        devices = kwargs.pop("devices", None)  # llama_model_params.devices: not a Llama() keyword
        rpc = kwargs.pop("rpc", None)  # paired devices' tunnels (rpc/): their devices registered here first
        if rpc and devices:
            devices, self.lent_names = _lent_devices(devices, rpc)
        host_tensors = kwargs.pop("host_tensors", None)  # llama_model_params.tensor_buft_overrides: likewise
        self.drafting = bool(kwargs.pop("drafts", False))  # prompt-lookup drafts (drafts.py): not a Llama() keyword
        lane = kwargs.pop("lane", None)  # the long-chat lane (lanes.py): likewise
        started = time.monotonic()
        try:
            with model_params(extra_bufts, on_progress, devices, host_tensors), sequences(kwargs) as seq_kwargs:
                self.llama = llama_cpp.Llama(model_path=msg["path"], verbose=False, **seq_kwargs)
        except Exception as exc:
            if cancel.is_set():
                self.reply(req_id, "error", error="LoadCancelled", message="the load was cancelled")
                return
            raise RuntimeError(f"llama.cpp could not load the model: {exc}") from exc
        self._warm_up(_test_crash_wanted(kwargs, extra_bufts))
        self.n_seq = llama_cpp.llama_n_seq_max(self.llama._ctx.ctx)
        self.step_threads = _step_threads(self.llama, kwargs, msg.get("threads_fixed", False), self.share)
        vision_error = self._load_projector(msg.get("mmproj"), kwargs)
        draft_error = self._load_draft(msg.get("draft"), dict(kwargs, devices=devices), extra_bufts)
        self._cache_from = (msg["path"], dict(kwargs, use_extra_bufts=extra_bufts, mmproj=msg.get("mmproj"),
                                              devices=devices, **({} if tiled else {"tiled_mm": False}),
                                              **({"host_tensors": host_tensors} if host_tensors else {})))
        lane_error = self._open_lane(lane, kwargs, msg.get("threads_fixed", False)) if lane and not kwargs.get("embedding") else ""
        if msg.get("kvcache") and not kwargs.get("embedding"):
            self.cache = self._open_cache(msg["kvcache"])
            self.lane_cache = self._open_cache(msg["kvcache"], lane=True) if self.lane else None
        from .tokens import longest_piece

        self.reply(req_id, "result", n_ctx=slot_context(self.llama), load_s=time.monotonic() - started,
                   buffers=dict(self.buffers), rss=_rss(), add_bos=self._add_bos(), n_seq=self.n_seq,
                   longest_piece=longest_piece(self.llama), threads=self.step_threads.now(), vision=self.projector is not None,
                   vision_error=vision_error, draft=self.draft_model.name if self.draft_model else None,
                   draft_error=draft_error, lane=lane if self.lane else None, lane_error=lane_error)

    def _open_lane(self, lane: dict, kwargs: dict, fixed: bool) -> str:
        """Open the long-chat lane (``lanes.py``) beside the model; one llama.cpp cannot make leaves the
        model loaded without it; returns why (empty when it opened)."""
        from .lanes import open_lane

        try:
            self.lane = open_lane(self.llama, lane["kind"], int(lane["from"]), bool(lane["flash_attn"]))
        except (ValueError, KeyError) as exc:
            print(f"fireside: the long-chat lane did not open ({exc}); every reply decodes in the model's context",
                  file=sys.stderr, flush=True)
            return f"the long-chat lane ({lane.get('kind')} attention) did not open: {exc}"
        self.lane_threads = _step_threads(self.lane, kwargs, fixed, self.share)
        print(f"fireside: long-chat lane: sampled replies from {self.lane.start:,} tokens of history decode with "
              f"{self.lane.kind} attention", file=sys.stderr, flush=True)
        return ""

    def _load_draft(self, draft: dict | None, kwargs: dict, extra_bufts: bool) -> str:
        """Load the draft model (``draftmodel.py``) beside the model: as many sequences of as many tokens,
        the same threads and kernels, on the GPU only when ``draft["n_gpu_layers"]`` says. One whose
        vocabulary differs from the model's, or that llama.cpp refuses, is not used, and the model
        loads without it; returns why (empty when it loaded)."""
        if not draft or kwargs.get("embedding"):
            return ""
        import llama_cpp

        from .draftmodel import DraftModel, vocabulary_difference

        name, started = draft.get("name") or os.path.basename(draft["path"]), time.monotonic()
        keep = ("n_ctx", "n_batch", "n_threads", "flash_attn", "use_mmap", "n_seq_max", "type_k", "type_v")
        draft_kwargs = {k: v for k, v in kwargs.items() if k in keep}
        if draft.get("kv_type") == "f16":  # its heads do not fit the model's quantized cache (planner.with_draft)
            draft_kwargs.pop("type_k", None), draft_kwargs.pop("type_v", None)
        try:
            with model_params(extra_bufts, devices=kwargs.get("devices")), sequences(draft_kwargs) as seq_kwargs:  # kernels as the model's
                llama = llama_cpp.Llama(model_path=draft["path"], verbose=False, n_gpu_layers=draft.get("n_gpu_layers", 0),
                                        **seq_kwargs)
        except Exception as exc:
            print(f"fireside: the draft model {name} did not load ({exc}); drafting without it", file=sys.stderr, flush=True)
            return f"the draft model {name} did not load: {exc}"
        why = vocabulary_difference(self.llama, llama)
        if why:
            llama.close()
            print(f"fireside: the draft model {name} was refused: {why}", file=sys.stderr, flush=True)
            return f"the draft model {name} cannot draft for this model: {why} (a draft model must have the same vocabulary)"
        self.draft_model = DraftModel(llama, name)
        self.draft_model.guess(0, self.llama.tokenize(b"Hello, warm-up", add_bos=True, special=False)[:8], 2)
        self.draft_model.forget()  # warmed up: a llama.cpp crash on this machine happens now, not mid-reply
        print(f"fireside: draft model {draft['path']} loaded in {time.monotonic() - started:.2f} s", file=sys.stderr,
              flush=True)
        return ""

    def _load_projector(self, path: str | None, kwargs: dict) -> str:
        """Load the vision projector (``vision.py``) beside the model, on the same devices. One that
        llama.cpp refuses leaves the model loaded for text; returns why (empty when it loaded)."""
        if not path or kwargs.get("embedding"):
            return ""
        from .vision import Projector

        started = time.monotonic()
        try:
            self.projector = Projector(path, self.llama, self.llama.n_threads,
                                       int(kwargs.get("n_gpu_layers") or 0) != 0, bool(kwargs.get("flash_attn")))
        except RuntimeError as exc:
            print(f"fireside: {exc}; the model reads text only", file=sys.stderr, flush=True)
            return str(exc)
        print(f"fireside: vision projector {path} loaded in {time.monotonic() - started:.2f} s", file=sys.stderr,
              flush=True)
        return ""

    def _warm_up(self, crash: bool) -> None:
        """Decode a few real tokens once, so a llama.cpp crash on this machine happens during the load
        (where the runtime retries more safely) and not on the user's first message."""
        import llama_cpp

        tokens = self.llama.tokenize(b"Hello, warm-up", add_bos=True, special=False)[:8]
        tokens = (tokens * 2)[:max(2, len(tokens))]  # more than one token: the batched kernels run
        print(f"fireside: warm-up decode of {len(tokens)} tokens", file=sys.stderr, flush=True)
        if crash:
            os.kill(os.getpid(), signal.SIGSEGV)  # FIRESIDE_TEST_RUNNER_CRASH: a simulated llama.cpp crash
        ids = (llama_cpp.llama_token * len(tokens))(*tokens)  # the batch only points at it: keep it alive
        batch = llama_cpp.llama_batch_get_one(ids, len(tokens))
        if llama_cpp.llama_decode(self.llama.ctx, batch) != 0:
            raise RuntimeError("llama.cpp could not decode its warm-up tokens")
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self.llama.ctx), True)

    def _open_cache(self, config: dict, lane: bool = False) -> Any:
        from . import kvcache, kvstate
        from .lanes import GGML_F16

        path, kwargs = self._cache_from
        if lane:  # the lane's states: its cache's type and attention are part of what they mean
            kwargs = dict(kwargs, type_k=GGML_F16, type_v=GGML_F16, flash_attn=self.lane.flash_attn)
        config = kvcache.CacheConfig(**config)
        ident = kvstate.identity(path, kwargs, slot_context(self.llama))
        print(f"fireside: prompt cache in {config.folder} (model identity {ident[:12]})", file=sys.stderr, flush=True)
        return kvstate.PromptCache(config, ident, os.path.basename(path))

    def prompt_cache(self, req_id: str, msg: dict, cancel: threading.Event) -> None:
        """Turn the prompt cache on (with ``msg["kvcache"]``'s folder and cap) or off (None), now."""
        for cache in self._caches():
            cache.close()  # its queued writes finish first
        self.cache = self.lane_cache = None
        if msg.get("kvcache") and not self._cache_from[1].get("embedding"):
            self.cache = self._open_cache(msg["kvcache"])
            self.lane_cache = self._open_cache(msg["kvcache"], lane=True) if self.lane else None
        if self.batch is not None:
            self.batch.cache = self.cache
        if self.lane_batch is not None:
            self.lane_batch.cache = self.lane_cache
        self.reply(req_id, "result", prompt_cache="on" if self.cache else "off")

    def _add_bos(self) -> bool:
        import llama_cpp

        vocab = llama_cpp.llama_model_get_vocab(self.llama._model.model)
        return bool(llama_cpp.llama_vocab_get_add_bos(vocab))

    def embed(self, req_id: str, msg: dict, cancel: threading.Event) -> None:
        if self.batch is not None:  # Llama.embed clears the KV cache the slots keep
            if self.batch.busy:
                raise RuntimeError("this runner is generating; embeddings need a runner of their own")
            self.batch.close()
            self.batch = None
        # llama-cpp-python's embed cuts an input at the batch; an embedding load's batch is its context as
        # asked (the runtime's _embedding_kwargs), which llama.cpp may have padded (to 256 tokens)
        n_ctx = min(self.llama.n_ctx(), self.llama.n_batch)
        for n in msg["counts"]:  # counted on the tokenizer thread
            if n > n_ctx and not msg.get("truncate"):
                self.reply(req_id, "error", error="ContextOverflow", prompt_tokens=n, context=n_ctx,
                           message=f"an input is {n:,} tokens but the context holds {n_ctx:,}")
                return
        normalize, timed = msg.get("normalize", True), self.step_threads
        # all the inputs in one request (a request per passage cost 2-3x as much on two cores: bench/retrieval.py),
        # embedded a batch's worth at a time, each a timed step of the thread controller (StepThreads.embed)
        vectors = (timed.embed(self.llama, msg["inputs"], msg["counts"], n_ctx, normalize, cancel) if timed else
                   self.llama.embed(msg["inputs"], normalize=normalize)) if msg["inputs"] else []
        if vectors is None:
            self.reply(req_id, "error", error="Cancelled", message="the embedding was cancelled")
            return
        self.reply(req_id, "result", vectors=vectors, tokens=sum(min(n, n_ctx) for n in msg["counts"]))

    def stats(self, req_id: str, msg: dict, cancel: threading.Event) -> None:
        slots = self.batch.slots if self.batch else []
        lane = self.lane_batch.slots if self.lane_batch else []
        self.reply(req_id, "result", rss=_rss(), buffers=dict(self.buffers), n_seq=self.n_seq,
                   n_tokens=sum(len(s.tokens) for s in [*slots, *lane]), slots=[len(s.tokens) for s in slots],
                   lane_slots=[len(s.tokens) for s in lane],
                   prompt_cache=self.cache.notice or "on" if self.cache else "off",
                   threads=self.step_threads.now() if self.step_threads else None)

    def _gather_wait(self, gather: Gather) -> float:
        """Seconds to wait for the rest of a burst before the next step; 0 once the slots are full."""
        if any(e.full for e in self._engines()):
            return 0.0
        return gather.wait(time.monotonic())

    def generate(self, req_id: str, msg: dict, cancel: threading.Event) -> bool:
        from .lanes import bring, wants_lane

        if self.batch is None:
            self.batch = BatchEngine(self.llama, self.n_seq, self._reply_generate, self._finished, self.cache,
                                     self.step_threads, drafting=self.drafting)
            self.batch.projector, self.batch.draft_model = self.projector, self.draft_model
        engine = self.batch
        tokens = msg.get("tokens") or []
        if wants_lane(self.lane, msg["sampling"], msg.get("images"), len(tokens)):
            if self.lane_batch is None:  # no projector (images stay in the model's context), no draft model
                self.lane_batch = BatchEngine(self.lane, self.n_seq, self._reply_generate, self._finished,
                                              self.lane_cache, self.lane_threads, drafting=self.drafting)
            engine = self.lane_batch
            bring(self.batch, engine, tokens)
        engine.submit(req_id, msg, cancel)
        if msg.get("images"):  # refused before the batch took them
            from .vision import free

            free(msg["images"])
        return True  # the batch engine replies and calls _finished when the request ends

    def _reply_generate(self, req_id: str, kind: str, **data: Any) -> None:
        """``reply`` for the batch engine: a ``done`` says the thread counts in use too (``fireside ps``)."""
        if kind == "done" and self.step_threads is not None:
            data["threads"] = self.step_threads.now()
        self.reply(req_id, kind, **data)

    def _finished(self, req_id: str) -> None:
        self.cancels.pop(req_id, None)


def _lent_devices(devices: list[str], rpc: dict) -> tuple[list[str], dict[str, str]]:
    """``devices`` with each paired device's name (``rpc:NAME``) replaced by the RPC device llama.cpp made for
    its tunnel, and the name llama.cpp gives that device's buffers (``RPC0[127.0.0.1:PORT]``) -> ``rpc:NAME``.
    Connecting is llama.cpp's, and it aborts this process when a tunnel does not answer: the server's side
    reports that as the device having gone away."""
    from ..ggml import rpc_devices

    endpoints, module = rpc["endpoints"], rpc.get("module") or None
    names, buffers = [], {}
    for d in devices:
        made = rpc_devices([endpoints[d]], module) if d in endpoints else [d]
        if d in endpoints:  # llama.cpp names a server's buffers by the device's index on that server
            buffers.update({f"RPC{i}[{endpoints[d]}]": d for i in range(len(made))})
        names += made
    return names, buffers


def _step_threads(llama: Any, kwargs: dict, fixed: bool, share: int | None) -> Any:
    """The load's thread counts, kept right while running (``threads.py``): ``n_threads`` is a user's
    fixed choice when ``fixed``, else the most the controller may use."""
    from .threads import StepThreads

    n = max(1, int(kwargs.get("n_threads") or os.cpu_count() or 1))
    step_threads = StepThreads(llama.ctx, n, n if fixed else None)
    if share is not None:
        step_threads.share = share
    return step_threads


def _test_crash_wanted(kwargs: dict, extra_bufts: bool) -> bool:
    """Whether the test-only switch ``FIRESIDE_TEST_RUNNER_CRASH`` (a comma list of ``extra_bufts``,
    ``flash_attn``, ``gpu``, ``batch``, or ``always``) asks this load to crash: it does while any listed
    option is on. ``once:PATH`` crashes the first load only (a transient: the file at PATH, made then,
    says it happened)."""
    wanted = {w.strip() for w in os.environ.get("FIRESIDE_TEST_RUNNER_CRASH", "").split(",") if w.strip()}
    for w in wanted:
        if w.startswith("once:"):
            try:
                Path(w.removeprefix("once:")).touch(exist_ok=False)
                return True
            except FileExistsError:
                pass
    on = {"always": True, "extra_bufts": extra_bufts, "flash_attn": bool(kwargs.get("flash_attn")),
          "gpu": int(kwargs.get("n_gpu_layers") or 0) > 0, "batch": int(kwargs.get("n_batch") or 512) > 64}
    return any(on.get(w) for w in wanted)


def _rss() -> int:
    try:
        import psutil

        return psutil.Process().memory_info().rss
    except Exception:
        return 0


def main() -> None:
    """Entry point of a runner process. The parent talks on stdin and our original stdout."""
    # Ctrl-C in a terminal reaches the whole process group; stopping a reply is the parent's call.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    proto_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints go to the log, not the pipe
    sys.stdout = sys.stderr
    pipe = FramedPipe(os.fdopen(os.dup(sys.stdin.fileno()), "rb", buffering=0), proto_out, background=True,
                      writer_start=yield_cpu)  # a frame can wait a moment; a decode thread's core cannot
    runner = Runner(pipe)
    pipe.send({"id": "", "type": "hello", "pid": os.getpid()})
    worker = threading.Thread(target=runner.work_loop, name="fireside-runner-worker", daemon=True)
    worker.start()
    threading.Thread(target=runner.tokenize_loop, name="fireside-runner-tokenizer", daemon=True).start()
    runner.read_loop()
    worker.join(timeout=5)
    pipe.close()  # the last replies (a shutdown's cancelled ones) reach the parent
    os._exit(0)  # skip interpreter teardown: llama.cpp's destructors are not needed at exit


if __name__ == "__main__":
    main()

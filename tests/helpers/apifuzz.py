"""Property-based fuzzing of the API server's request models: Hypothesis strategies for each
dialect's bodies, and a server to aim them at. Used by ``tests/server/test_fuzz.py`` (a bounded run
in the normal suite) and ``fuzz/fuzz_api.py`` (a longer one).

The server is the real app on loopback over a real ``Runtime`` with just-in-time loading off, so no
model is ever loaded: a well-formed request for a local model gets a 404 after every field has been
checked and translated. A fake OpenAI-compatible server added as the remote engine ``fake`` lets
requests for ``remote/fake/fake-model`` run all the way through generation and each dialect's
encoder. Bodies mix plausible values with arbitrary JSON (NaN, infinities, lone surrogates, deep
nesting, wrong types) at every field; the property is that no request gets a 500.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
from hypothesis import strategies as st

from fireside.engine.documents.limits import MAX_QUERY_CHARS, MAX_QUERY_TERMS
from fireside.engine.facade import Engine
from fireside.engine.library import Library
from fireside.engine.remote import RemoteEngine, RemoteRegistry
from fireside.engine.server import ServerThread, create_app
from fireside.engine.settings import Settings
from tests.helpers.fakeopenai import Behaviour, start_fake_server
from tests.helpers.keyrings import DictKeys

REMOTE_MODEL = "remote/fake/fake-model"

any_text = st.text(st.characters(codec=None), max_size=12)  # surrogates included
scalars = (st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | any_text)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) |
                           st.dictionaries(any_text, inner, max_size=3), max_leaves=8)


def field(valid: st.SearchStrategy) -> st.SearchStrategy:
    """Mostly a plausible value, sometimes any JSON at all."""
    return st.one_of(valid, valid, json_values)


def body(required: dict, optional: dict) -> st.SearchStrategy:
    return st.fixed_dictionaries({k: field(v) for k, v in required.items()},
                                 optional={k: field(v) for k, v in optional.items()})


models = st.sampled_from(["starter", REMOTE_MODEL, "no-such-model", "../x.gguf"]) | any_text
texts = st.text(max_size=20) | any_text
roles = st.sampled_from(["system", "user", "assistant", "tool", "developer"]) | any_text
small_ints = st.integers(-3, 40)
unit = st.floats(-0.5, 1.5)
MARKUP = "</s><|im_end|>\n<|im_start|>system"  # chat markup a schema may demand (issue 42, case 6)
schema = st.sampled_from([{"type": "object"}, {"type": "string"}, {"type": "array", "items": {"type": "integer"}},
                          {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                          {"type": "object", "properties": {"a": {"const": MARKUP}}, "required": ["a"]},
                          {"type": "string", "enum": [MARKUP, "<think>x</think>"]}])
# texts past the caps, made once: a query of too many words or characters, a prediction, a long message
long_texts = st.sampled_from([" ".join(f"w{i}" for i in range(MAX_QUERY_TERMS + 1)), "x" * (MAX_QUERY_CHARS + 1),
                              "lorem ipsum " * 30_000])
stops = texts | st.lists(texts, max_size=3)
fn_tool = st.fixed_dictionaries({"type": st.just("function"), "function": body(
    {"name": st.sampled_from(["get_time", "add"])}, {"description": texts, "parameters": schema})})
oai_message = body({"role": roles}, {"content": texts | st.lists(
    body({"type": st.sampled_from(["text", "image_url"])}, {"text": texts}), max_size=2),
    "tool_calls": st.lists(body({"function": body({"name": texts}, {"arguments": texts})}, {"id": texts}), max_size=1),
    "tool_call_id": texts, "name": texts})

openai_chat = body({"model": models, "messages": st.lists(oai_message, min_size=1, max_size=3)}, {
    "max_tokens": small_ints, "temperature": st.floats(-1, 3), "top_p": unit, "seed": st.integers(-2, 2**33),
    "stop": stops, "stream": st.booleans(), "tools": st.lists(fn_tool, max_size=2),
    "tool_choice": st.sampled_from(["auto", "none", "required"]) | st.just({"type": "function",
                                                                           "function": {"name": "add"}}),
    "response_format": st.sampled_from([{"type": "text"}, {"type": "json_object"}, {"type": "json_schema",
                                        "json_schema": {"name": "x", "schema": {"type": "object"}}}]),
    "stream_options": st.just({"include_usage": True}), "n": small_ints,
    "frequency_penalty": st.floats(-3, 3), "presence_penalty": st.floats(-3, 3),
    "prediction": body({"type": st.just("content")}, {"content": texts | long_texts})})
openai_completion = body({"model": models, "prompt": texts | st.lists(texts, max_size=2)}, {
    "max_tokens": small_ints, "temperature": st.floats(-1, 3), "stop": stops, "stream": st.booleans()})
openai_embedding = body({"model": models, "input": texts | st.lists(texts, max_size=2)},
                        {"encoding_format": st.sampled_from(["float", "base64", "hex"])})
responses = body({"model": models, "input": texts | st.lists(body({"type": st.sampled_from(
    ["message", "function_call", "function_call_output"])}, {"role": roles, "content": texts, "name": texts,
                                                             "call_id": texts, "output": texts}), max_size=3)}, {
    "instructions": texts, "max_output_tokens": small_ints, "stream": st.booleans(),
    "tools": st.lists(body({"type": st.sampled_from(["function", "web_search", "file_search"])}, {
        "name": texts, "vector_store_ids": st.lists(texts, max_size=2), "max_num_results": small_ints}), max_size=2),
    "tool_choice": st.sampled_from(["auto", "none", "required", {"type": "file_search"}]),
    "previous_response_id": texts, "text": st.just({"format": {"type": "json_object"}}),
    "truncation": st.sampled_from(["auto", "disabled", "middle"]), "parallel_tool_calls": st.booleans(),
    "max_tool_calls": small_ints, "top_logprobs": small_ints,
    "include": st.lists(st.sampled_from(["message.output_text.logprobs", "reasoning.encrypted_content",
                                         "file_search_call.results"]) | texts, max_size=2)})
vector_store = body({}, {"name": texts, "file_ids": st.lists(texts, max_size=2), "metadata": st.dictionaries(texts, texts),
                         "chunking_strategy": st.just({"type": "auto"}), "expires_after": json_values})
store_search = body({"query": texts | long_texts | st.lists(texts, max_size=2)}, {
    "max_num_results": small_ints, "filters": json_values, "ranking_options": json_values, "rewrite_query": st.booleans()})

ant_block = body({"type": st.sampled_from(["text", "image", "tool_use", "tool_result", "thinking"])},
                 {"text": texts, "name": texts, "id": texts, "input": st.dictionaries(texts, texts, max_size=2),
                  "tool_use_id": texts, "content": texts})
ant_message = body({"role": roles, "content": texts | st.lists(ant_block, max_size=3)}, {})
anthropic_messages = body({"model": models, "max_tokens": small_ints,
                           "messages": st.lists(ant_message, min_size=1, max_size=3)}, {
    "system": texts, "stream": st.booleans(), "temperature": unit, "top_k": small_ints, "stop_sequences": stops,
    "tools": st.lists(body({"name": texts}, {"input_schema": schema, "description": texts}), max_size=2),
    "tool_choice": body({"type": st.sampled_from(["auto", "any", "tool", "none"])}, {"name": texts})})

ollama_options = body({}, {"num_predict": small_ints, "temperature": st.floats(-1, 3), "top_k": small_ints,
                           "top_p": unit, "seed": st.integers(-2, 2**33), "stop": stops, "num_ctx": small_ints,
                           "typical_p": unit, "repeat_last_n": st.integers(-3, 2**32), "mirostat": small_ints,
                           "mirostat_tau": st.floats(-1, 20), "mirostat_eta": unit})
ollama_message = body({"role": roles}, {"content": texts, "images": st.lists(texts, max_size=1), "tool_name": texts,
                                        "tool_calls": st.lists(body({"function": body(
                                            {"name": texts}, {"arguments": st.dictionaries(texts, texts)})}, {}),
                                            max_size=1)})
ollama_chat = body({"model": models}, {"messages": st.lists(ollama_message, max_size=3), "options": ollama_options,
                                       "stream": st.booleans(), "format": st.just("json") | schema,
                                       "keep_alive": st.sampled_from(["5m", "-1", "1e400", "0.5h", 30]),
                                       "think": st.booleans(), "tools": st.lists(fn_tool, max_size=1)})
ollama_generate = body({"model": models}, {"prompt": texts, "system": texts, "options": ollama_options,
                                           "raw": st.booleans(), "stream": st.booleans(), "format": st.just("json")})
ollama_show = body({}, {"model": models, "name": models})


def _png(size: int, mode: str = "RGB") -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new(mode, (size, size)).save(buf, "PNG")
    return buf.getvalue()


def _data_url(data: bytes, media_type: str = "image/png") -> str:
    import base64

    return f"data:{media_type};base64," + base64.b64encode(data).decode()


BIG_PNG = _png(4096, "1")  # 4096x4096, a few KB: the per-request pixel budget's unit (issue 42, case 3)
image_urls = st.sampled_from([_data_url(_png(8)), _data_url(BIG_PNG), _data_url(_png(1024, "1")),
                              _data_url(BIG_PNG[:len(BIG_PNG) // 2]), _data_url(_png(8), "image/jpeg"),
                              _data_url(b"<svg xmlns='http://www.w3.org/2000/svg'/>", "image/svg+xml"),
                              "data:image/png;base64,not base64!", "file:///etc/passwd"])
image_part = st.fixed_dictionaries({"type": st.just("image_url"), "image_url": st.fixed_dictionaries({"url": image_urls})})
openai_images = body({"model": models, "messages": st.lists(st.fixed_dictionaries({"role": st.just("user"), "content": st.lists(
    image_part | st.just({"type": "text", "text": "What is this?"}), max_size=20)}), min_size=1, max_size=2)},
    {"max_tokens": small_ints, "stream": st.booleans()})
query_params = st.fixed_dictionaries({}, optional={"limit": st.integers(-1, 200) | texts, "order": st.sampled_from(
    ["asc", "desc"]) | texts, "after": texts, "before": texts, "filter": st.sampled_from(
    ["in_progress", "completed", "failed", "cancelled"]) | texts})

ROUTES: dict[str, tuple[str, str, st.SearchStrategy]] = {
    "openai.chat": ("POST", "/v1/chat/completions", openai_chat),
    "openai.completions": ("POST", "/v1/completions", openai_completion),
    "openai.embeddings": ("POST", "/v1/embeddings", openai_embedding),
    "openai.responses": ("POST", "/v1/responses", responses),
    "openai.vector_stores": ("POST", "/v1/vector_stores", vector_store),
    "openai.vector_store_search": ("POST", "/v1/vector_stores/vs_none/search", store_search),
    "openai.chat_images": ("POST", "/v1/chat/completions", openai_images),
    "openai.batch_files": ("GET", "/v1/vector_stores/vs_none/file_batches/vsfb_none/files", query_params),
    "anthropic.messages": ("POST", "/v1/messages", anthropic_messages),
    "anthropic.count_tokens": ("POST", "/v1/messages/count_tokens", anthropic_messages),
    "ollama.chat": ("POST", "/api/chat", ollama_chat),
    "ollama.generate": ("POST", "/api/generate", ollama_generate),
    "ollama.embed": ("POST", "/api/embed", body({"model": models}, {"input": texts | st.lists(texts, max_size=2)})),
    "ollama.show": ("POST", "/api/show", ollama_show),
    "ollama.delete": ("DELETE", "/api/delete", ollama_show),
}


@dataclass
class Outcome:
    status: int
    text: str


class FuzzServer:
    """The app on loopback over a model-free runtime; ``send`` posts one generated body."""

    def __init__(self, url: str):
        self.url = url
        self.client = httpx.Client(base_url=url, timeout=30)

    def send(self, route: str, value: object, raw: bytes | None = None) -> Outcome:
        method, path, _ = ROUTES[route]
        if method == "GET" and raw is None:  # the value is the query string
            params = {k: str(v).encode("utf-8", "backslashreplace").decode() for k, v in (value or {}).items()}
            r = self.client.get(path, params=params)
            return Outcome(r.status_code, r.text)
        data = raw if raw is not None else json.dumps(value).encode("ascii")  # escapes lone surrogates
        r = self.client.request(method, path, content=data, headers={"Content-Type": "application/json"})
        return Outcome(r.status_code, r.text)


def is_crash(outcome: Outcome) -> bool:
    """A 500, or an internal error reported inside a stream: what the fuzzing must never see."""
    return outcome.status == 500 or '"internal_error"' in outcome.text or "internal error:" in outcome.text


@contextmanager
def fuzz_server(home) -> Iterator[FuzzServer]:
    settings = Settings.from_env({"FIRESIDE_HOME": str(home)})
    settings.ensure_dirs()
    fake = start_fake_server(Behaviour(interval_s=0.0, ttft_s=0.0, stop_after=3))
    registry = RemoteRegistry(settings, keys=DictKeys())
    registry.add("fake", f"{fake.url}/v1")
    library = Library(settings)
    runtime = Engine(settings, resolver=lambda ref: library.get(ref).path,
                     remotes=RemoteEngine(settings, registry))
    thread = ServerThread(create_app(runtime, settings, library, jit=False), "127.0.0.1", 0)
    thread.start()
    try:
        yield FuzzServer(thread.url)
    finally:
        thread.stop()
        runtime.close()
        fake.stop()

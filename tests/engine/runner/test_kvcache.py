"""The prompt cache on disk (engine/runner/kvcache.py, runner/kvstate.py): a conversation resumes after the runtime
restarts, on the real SmolLM2; a corrupted file is refused; another model file of the same name never
reuses a state; the size cap evicts the least recently used; an unwritable or full folder never fails
a reply."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from fireside.engine.models.fitplan import LoadOptions
from fireside.engine.runner import kvcache, kvstate
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.settings import Settings
from fireside.engine.types import ChatRequest, Sampling
from tests.helpers.waiting import wait_until

SYSTEM = ("You are the guide of a small railway museum in a mountain valley. The museum keeps three steam "
          "engines, a signal box from 1911 that visitors may operate under supervision, and a reading room "
          "with timetables going back a hundred years. Answer briefly and in plain words. ") * 2
FIRST = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "What can I see in the signal box?"}]


def settings_in(home: Path, **changes) -> Settings:
    s = Settings.from_env({"FIRESIDE_HOME": str(home)})
    for key, value in changes.items():
        setattr(s, key, value)
    return s


def turn(rt: Runtime, messages: list[dict], model: str = "starter", tag: str | None = None):
    chunks = list(rt.chat(model, ChatRequest(messages, Sampling(temperature=0, max_tokens=16), cache_tag=tag)))
    return "".join(c.text for c in chunks if c.kind == "text"), chunks[-1].usage


def session(settings: Settings) -> Runtime:
    rt = Runtime(settings, idle_ttl_s=0)
    rt.load("starter", LoadOptions(context=1024, parallel=1))
    return rt


def second_turn(first_reply: str) -> list[dict]:
    return [*FIRST, {"role": "assistant", "content": first_reply},
            {"role": "user", "content": "And the reading room?"}]


# --- on the real model --------------------------------------------------------------------------
@pytest.mark.model
def test_a_conversation_resumes_from_disk_after_a_restart(tmp_path):
    settings = settings_in(tmp_path)
    rt = session(settings)
    try:
        reply, first = turn(rt, FIRST, tag="chat-7")
    finally:
        rt.close()  # the runner ends; its saved state stays on disk
    assert first.restored_tokens == 0
    [entry] = kvcache.entries(settings.prompt_cache_dir)
    assert entry.tag == "chat-7" and entry.n_tokens >= first.prompt_tokens

    rt = session(settings)
    try:
        _, second = turn(rt, second_turn(reply))
    finally:
        rt.close()
    assert second.restored_tokens >= first.prompt_tokens  # turn one and (most of) its reply came from disk
    assert second.cached_tokens == second.restored_tokens
    assert second.prompt_tokens - second.cached_tokens < 40  # only the new question was evaluated
    [entry] = kvcache.entries(settings.prompt_cache_dir)  # the longer conversation replaced the shorter
    assert entry.n_tokens > second.prompt_tokens and entry.tag == "chat-7"  # the chat's tag carried over
    assert kvcache.clear(settings.prompt_cache_dir, tag="chat-7") == 1  # deleting the chat deletes it
    assert kvcache.entries(settings.prompt_cache_dir) == []
    assert not list(settings.prompt_cache_dir.glob("kv-*.bin"))


@pytest.mark.model
def test_a_reply_that_ends_while_another_streams_is_written_once_the_runner_is_idle(tmp_path):
    """Writing a state costs CPU every stream in the batch would wait for, so the writer waits until the
    runner decodes nothing: a short reply ending beside a long one is on disk only after the long one ends,
    and then both are."""
    import threading

    settings = settings_in(tmp_path)
    rt = Runtime(settings, idle_ttl_s=0)
    rt.load("starter", LoadOptions(context=1024, parallel=2))
    try:
        turn(rt, [{"role": "user", "content": "Hi"}])  # warm, and its own (short) state below min_tokens
        started = threading.Event()
        long_done = threading.Event()
        seen_while_streaming = []

        def long_reply():
            story = [{"role": "user", "content": "Tell me a very long story about a lighthouse keeper."}]
            for chunk in rt.chat("starter", ChatRequest(story, Sampling(temperature=0, max_tokens=160))):
                if chunk.kind == "text":
                    started.set()
            long_done.set()

        streaming = threading.Thread(target=long_reply)
        streaming.start()
        assert started.wait(60)
        _, short = turn(rt, FIRST)  # ends while the story still streams
        assert not long_done.is_set(), "the story ended first: nothing to show"
        time.sleep(0.5)
        seen_while_streaming = kvcache.entries(settings.prompt_cache_dir)
        assert not long_done.is_set(), "the story ended while we looked: nothing to show"
        streaming.join(120)
        deadline = time.monotonic() + 10
        while len(kvcache.entries(settings.prompt_cache_dir)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        rt.close()
    assert seen_while_streaming == []  # nothing written while the story was decoded
    sizes = sorted(e.n_tokens for e in kvcache.entries(settings.prompt_cache_dir))
    assert len(sizes) == 2 and sizes[0] >= short.prompt_tokens  # both written once it ended


@pytest.mark.model
def test_a_flipped_byte_is_refused_and_the_prompt_evaluated_with_the_same_reply(tmp_path):
    settings = settings_in(tmp_path)
    rt = session(settings)
    try:
        reply, _ = turn(rt, FIRST)
    finally:
        rt.close()
    [entry] = kvcache.entries(settings.prompt_cache_dir)
    path = settings.prompt_cache_dir / entry.file
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0x01  # one bit, deep inside the KV data, where llama.cpp would take it blindly
    path.write_bytes(bytes(raw))

    rt = session(settings)
    try:
        refused_text, refused = turn(rt, second_turn(reply))
    finally:
        rt.close()
    assert refused.restored_tokens == 0 and refused.cached_tokens == 0  # evaluated, not loaded
    assert not path.exists()  # the bad file is gone; the new turn saved a good one
    assert [e.file for e in kvcache.entries(settings.prompt_cache_dir)] != [entry.file]

    fresh = session(settings_in(tmp_path / "nocache", prompt_cache=False))
    try:
        fresh_text, _ = turn(fresh, second_turn(reply))
    finally:
        fresh.close()
    assert refused_text == fresh_text


def _renamed_copy(src: Path, dst: Path, name: str) -> Path:
    """A copy of the GGUF with another ``general.name``: another model file, same tokenizer and template."""
    import gguf
    from gguf.scripts.gguf_new_metadata import MetadataDetails, copy_with_new_metadata

    reader = gguf.GGUFReader(str(src))
    arch = reader.get_field(gguf.Keys.General.ARCHITECTURE).contents()
    writer = gguf.GGUFWriter(str(dst), arch=arch, endianess=reader.endianess)
    copy_with_new_metadata(reader, writer, {gguf.Keys.General.NAME: MetadataDetails(gguf.GGUFValueType.STRING, name)},
                           [])
    return dst


@pytest.mark.model
def test_another_model_file_with_the_same_name_never_reuses_a_state(tmp_path, smollm2_path):
    import gguf

    folder = tmp_path / "models"
    folder.mkdir()
    model = folder / "model.gguf"
    shutil.copyfile(smollm2_path, model)
    original = gguf.GGUFReader(str(smollm2_path)).get_field(gguf.Keys.General.NAME).contents()
    other = _renamed_copy(smollm2_path, tmp_path / "other.gguf", "X" * len(original))
    settings = settings_in(tmp_path / "home")

    def run(messages):
        rt = Runtime(settings, resolver=lambda ref: model, idle_ttl_s=0)
        try:
            rt.load("mine", LoadOptions(context=1024, parallel=1))
            return turn(rt, messages, model="mine")
        finally:
            rt.close()

    reply, _ = run(FIRST)
    assert len(kvcache.entries(settings.prompt_cache_dir)) == 1
    stat = model.stat()
    os.replace(other, model)  # same path, same name; the same size and mtime too: only the bytes differ
    assert model.stat().st_size == stat.st_size
    os.utime(model, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    _, usage = run(second_turn(reply))
    assert usage.restored_tokens == 0 and usage.cached_tokens == 0
    identities = {e.identity for e in kvcache.entries(settings.prompt_cache_dir)}
    assert len(identities) == 2  # each file keeps its own states


@pytest.mark.model
def test_turning_the_cache_off_and_on_reaches_a_loaded_model_at_once(tmp_path):
    settings = settings_in(tmp_path)
    rt = session(settings)
    try:
        settings.prompt_cache = False
        rt.apply_prompt_cache()
        reply, _ = turn(rt, FIRST)
        assert kvcache.entries(settings.prompt_cache_dir) == []  # off: nothing saved
        settings.prompt_cache = True
        rt.apply_prompt_cache()
        turn(rt, second_turn(reply))
    finally:
        rt.close()
    assert len(kvcache.entries(settings.prompt_cache_dir)) == 1  # on again, without a reload


# The runner with its file size limited: every file it writes past 1 MiB fails (EFBIG), as on a full disk.
FULL_DISK_RUNNER = [sys.executable, "-c", "import resource; resource.setrlimit(resource.RLIMIT_FSIZE, "
                    "(1 << 20, 1 << 20)); from fireside.engine.runner.process import main; main()"]


@pytest.mark.model
def test_a_full_disk_turns_saving_off_and_never_fails_a_reply(tmp_path):
    settings = settings_in(tmp_path)
    rt = Runtime(settings, idle_ttl_s=0, runner_command=FULL_DISK_RUNNER)
    try:
        rt.load("starter", LoadOptions(context=1024, parallel=1))
        reply, first = turn(rt, FIRST)
        text, second = turn(rt, second_turn(reply))
        [loaded] = rt.loaded()
    finally:
        rt.close()
    assert reply.strip() and text.strip()
    assert first.completion_tokens > 0 and second.completion_tokens > 0
    assert kvcache.entries(settings.prompt_cache_dir) == []
    assert not [p for p in settings.prompt_cache_dir.iterdir() if p.name.startswith("kv-")]  # no torn file left
    log = "\n".join(p.read_text(errors="replace") for p in (settings.cache_dir / "logs").glob("*.log"))
    assert log.count("prompt cache saving is off") == 1  # one notice, not one per reply


@pytest.mark.model
def test_an_unusable_cache_folder_never_fails_a_reply(tmp_path):
    settings = settings_in(tmp_path)
    settings.prompt_cache_dir.parent.mkdir(parents=True)
    settings.prompt_cache_dir.write_text("a file where the cache folder should be")
    rt = session(settings)
    try:
        reply, usage = turn(rt, FIRST)
        again, _ = turn(rt, second_turn(reply))
    finally:
        rt.close()
    assert reply.strip() and again.strip() and usage.completion_tokens > 0


@pytest.mark.model
@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes into a read-only folder anyway")
def test_a_read_only_cache_folder_never_fails_a_reply(tmp_path):
    settings = settings_in(tmp_path)
    settings.prompt_cache_dir.mkdir(parents=True)
    settings.prompt_cache_dir.chmod(0o555)
    rt = session(settings)
    try:
        reply, usage = turn(rt, FIRST)
    finally:
        rt.close()
        settings.prompt_cache_dir.chmod(0o755)
    assert reply.strip() and usage.completion_tokens > 0


# --- the folder, without a model -------------------------------------------------------------------
def _saved(cache: kvstate.PromptCache, tokens: list[int], size: int) -> None:
    assert cache.save(tokens, bytearray(size))
    wait_until(lambda: (hit := cache.lookup(tokens)) is not None and hit[1] == len(tokens), 10)  # in the index


def test_the_size_cap_evicts_the_least_recently_used(tmp_path):
    cap = 3 * 10_000
    cache = kvstate.PromptCache(kvcache.CacheConfig(str(tmp_path), cap, min_tokens=1), "model-a")
    try:
        for first in (1, 2, 3):
            _saved(cache, [first] * 8, 9_000)
            # distinct last-used times: the clock has passed the newest entry's
            wait_until(lambda: time.time() > max(e.last_used for e in kvcache.entries(tmp_path)), 1)
        hit = cache.lookup([1] * 8 + [5])
        assert hit is not None and hit[1] == 8
        assert cache.read(hit[0]) is not None  # reading [1]*8 makes it the most recently used
        _saved(cache, [4] * 8, 9_000)
    finally:
        cache.close()
    kept = [k for k in (1, 2, 3, 4) if (hit := cache.lookup([k] * 8)) and hit[1] == 8]
    assert kept == [1, 3, 4]  # [2]*8 was the least recently used
    assert sum(e.size for e in kvcache.entries(tmp_path)) <= cap
    assert len(list(tmp_path.glob("kv-*.bin"))) == 3


def test_a_longer_turn_replaces_the_shorter_and_another_identity_is_never_offered(tmp_path):
    a = kvstate.PromptCache(kvcache.CacheConfig(str(tmp_path), 1 << 30, min_tokens=1), "model-a")
    b = kvstate.PromptCache(kvcache.CacheConfig(str(tmp_path), 1 << 30, min_tokens=1), "model-b")
    try:
        _saved(a, [7, 8, 9], 100)
        _saved(a, [7, 8, 9, 10, 11], 120)  # the same conversation a turn later
        assert [e.n_tokens for e in kvcache.entries(tmp_path)] == [5]
        assert b.lookup([7, 8, 9, 10, 11, 12]) is None
        entry, n = a.lookup([7, 8, 9, 10, 99])
        assert (entry.tokens, n) == ([7, 8, 9, 10, 11], 4)
    finally:
        a.close()
        b.close()


def test_a_state_waits_for_a_quiet_runner_and_a_newer_turn_takes_its_place(tmp_path):
    """A reply's state is written once the runner has decoded nothing for WRITE_QUIET_S, not as the reply
    ends (the conversation's next request is being read then); while it waits, the same conversation's
    next turn takes its place, and with PENDING other conversations waiting a new one is not taken."""
    cache = kvstate.PromptCache(kvcache.CacheConfig(str(tmp_path), 1 << 30, min_tokens=1), "model-a")
    try:
        cache.decoding(True)
        assert cache.save([1, 2, 3], bytearray(100))
        assert cache.save([1, 2, 3, 4, 5], bytearray(120))  # the same conversation a turn later
        assert cache.save([9, 9], bytearray(100))
        assert not cache.wants([6, 6]) and not cache.save([6, 6], bytearray(100))  # PENDING are waiting
        time.sleep(kvstate.WRITE_QUIET_S + 0.2)
        assert kvcache.entries(tmp_path) == []  # nothing while the runner decodes
        cache.decoding(False)
        quiet_at = time.monotonic()
        wait_until(lambda: len(kvcache.entries(tmp_path)) == 2, 10)
        assert time.monotonic() - quiet_at >= kvstate.WRITE_QUIET_S
        assert sorted(e.n_tokens for e in kvcache.entries(tmp_path)) == [2, 5]  # the newer turn, and the other
        assert cache.lookup([1, 2, 3, 4, 5, 6])[1] == 5
    finally:
        cache.close()


def test_a_truncated_file_is_refused_and_deleted(tmp_path):
    cache = kvstate.PromptCache(kvcache.CacheConfig(str(tmp_path), 1 << 30, min_tokens=1), "model-a")
    try:
        _saved(cache, [1, 2, 3, 4], 5_000)
        entry, _ = cache.lookup([1, 2, 3, 4, 5])
        path = tmp_path / entry.file
        path.write_bytes(path.read_bytes()[:-10])
        assert cache.read(entry) is None
        assert not path.exists() and kvcache.entries(tmp_path) == []
    finally:
        cache.close()


def test_an_unreadable_index_starts_afresh_and_clear_always_empties_the_folder(tmp_path):
    (tmp_path / kvcache.INDEX).write_bytes(b"not a database at all" * 100)
    (tmp_path / "kv-orphan.bin").write_bytes(b"x" * 100)
    stale = tmp_path / ".kv-torn.bin.abc.tmp"
    stale.write_bytes(b"half a write")
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    cache = kvstate.PromptCache(kvcache.CacheConfig(str(tmp_path), 1 << 30, min_tokens=1), "model-a")
    try:
        assert cache.saving
        assert not stale.exists() and not (tmp_path / "kv-orphan.bin").exists()
        _saved(cache, [1, 2, 3], 1_000)
        assert len(kvcache.entries(tmp_path)) == 1
    finally:
        cache.close()
    (tmp_path / kvcache.INDEX).write_bytes(b"broken again" * 100)
    assert kvcache.clear(tmp_path) == 1  # the state file goes even though the index cannot say so
    assert not list(tmp_path.glob("kv-*.bin"))


def test_a_state_still_being_written_when_its_chat_is_deleted_is_dropped(tmp_path):
    cache = kvstate.PromptCache(kvcache.CacheConfig(str(tmp_path), 1 << 30, min_tokens=1), "model-a")
    try:
        _saved(cache, [1, 2, 3], 1_000)  # makes the index
        taken_at = time.time()
        assert kvcache.clear(tmp_path, tag="chat-9") == 0  # the chat is deleted before its last state lands
        cache._write([5, 6, 7], bytearray(1_000), "chat-9", taken_at)
        assert [e.tag for e in kvcache.entries(tmp_path)] == [None]
        assert len(list(tmp_path.glob("kv-*.bin"))) == 1
        cache._write([5, 6, 7, 8], bytearray(1_000), "chat-9", time.time())  # the chat, restored, goes on
        assert sorted(e.tag or "" for e in kvcache.entries(tmp_path)) == ["", "chat-9"]
    finally:
        cache.close()


def test_lookups_read_the_index_from_memory_and_see_other_processes_writes(tmp_path, monkeypatch):
    """A runner's admissions look the prompt cache up in memory (before, each one opened the index and
    read every entry's tokens); a write by another runner or by ``fireside cache clear`` is still seen."""
    config = kvcache.CacheConfig(str(tmp_path), 1 << 30, min_tokens=1)
    ours, other = kvstate.PromptCache(config, "model-a"), kvstate.PromptCache(config, "model-a")
    try:
        _saved(ours, [1, 2, 3], 100)
        opened = []
        real = kvstate.open_index
        monkeypatch.setattr(kvstate, "open_index", lambda *a, **k: opened.append(a) or real(*a, **k))
        for _ in range(50):
            assert ours.lookup([1, 2, 3, 4])[1] == 3
        assert opened == []  # nothing changed on disk: not one read of the index
        _saved(other, [5, 6, 7], 100)  # another runner of the same model saves a conversation
        assert ours.lookup([5, 6, 7, 8])[1] == 3
        assert kvcache.clear(tmp_path) == 2  # the CLI empties the cache
        assert ours.lookup([1, 2, 3, 4]) is None and ours.lookup([5, 6, 7, 8]) is None
    finally:
        ours.close()
        other.close()


def test_a_write_under_way_stops_while_the_runner_decodes_and_ends_whole(tmp_path, monkeypatch):
    """A long chat's state is hundreds of MB; one written while the next turn decodes took that turn's speed
    (8k tokens: 31 against 34.5 tok/s). A write goes on a chunk at a time and waits between chunks while the
    runner decodes, then finishes, its checksum right."""
    monkeypatch.setattr(kvstate, "WRITE_CHUNK", 64 << 10)
    state = bytearray(os.urandom(1 << 20)) * 48  # 48 MB: 768 chunks
    cache = kvstate.PromptCache(kvcache.CacheConfig(str(tmp_path), 1 << 30, min_tokens=1), "model-a")
    try:
        assert cache.save([1, 2, 3], state)
        wait_until(lambda: any(f.stat().st_size > 0 for f in tmp_path.glob(".kv-*.tmp")), 10)  # it has begun
        cache.decoding(True)  # the next turn decodes
        sizes = []

        def settled() -> bool:  # the chunk under way finishes (the writer is niced: on a busy machine, late)
            sizes.append(sum(f.stat().st_size for f in tmp_path.glob(".kv-*.tmp")))
            time.sleep(0.05)
            return len(sizes) >= 4 and len(set(sizes[-4:])) == 1

        wait_until(settled, 10)
        [partial] = list(tmp_path.glob(".kv-*.tmp"))  # not renamed into place: the write has not ended
        written = partial.stat().st_size
        time.sleep(kvstate.WRITE_QUIET_S + 0.3)
        assert partial.stat().st_size == written < len(state) and kvcache.entries(tmp_path) == []
        cache.decoding(False)
        wait_until(lambda: kvcache.entries(tmp_path) != [], 30)
        hit = cache.lookup([1, 2, 3, 4])
        assert hit is not None and hit[1] == 3
        assert bytes(cache.read(hit[0])) == bytes(state)  # whole, and its checksum agrees
    finally:
        cache.close()

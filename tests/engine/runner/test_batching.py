"""Continuous batching on the real SmolLM2: requests decoded together in slots, prefix reuse across
requests and slots, and log-probabilities, through the real runtime and (for two clients) the real
API server with the real ``openai`` client."""

from __future__ import annotations

import threading
import time

import openai
import pytest

from fireside.engine.models.fitplan import LoadOptions
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.server import ServerThread, create_app
from fireside.engine.settings import Settings
from fireside.engine.types import ChatRequest, Sampling
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.model

SYSTEM = ("You are a patient assistant for a lighthouse museum on a rocky northern coast. Answer in plain "
          "words, keep to the facts the visitor asks about, and say so when you do not know something. The "
          "museum has three rooms: the lamp room with the old Fresnel lens, the keepers' kitchen, and the "
          "storm gallery with logbooks from a century of winters. Tickets are sold at the door; children "
          "under twelve go free, and guided tours start on the hour.")


def two_slots(home) -> Runtime:
    settings = Settings.from_env({"FIRESIDE_HOME": str(home)})
    settings.ensure_dirs()
    rt = Runtime(settings, idle_ttl_s=0)
    rt.load("starter", LoadOptions(context=2048, parallel=2))
    return rt


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    rt = two_slots(tmp_path_factory.mktemp("batch"))
    yield rt
    rt.close()


@pytest.fixture
def unused_cache(tmp_path):
    """Two slots and a prompt cache nobody has used: no other test's snapshots wait to be written (the
    writer keeps two waiting at most, so a turn saved behind two others is not saved at all)."""
    rt = two_slots(tmp_path)
    yield rt
    rt.close()


@pytest.fixture(scope="module")
def client(runtime):
    thread = ServerThread(create_app(runtime, runtime.settings), "127.0.0.1", 0)
    thread.start()
    yield openai.OpenAI(base_url=f"{thread.url}/v1", api_key="x", max_retries=0)
    thread.stop()


def chat(runtime, messages, **sampling):
    chunks = list(runtime.chat("starter", ChatRequest(messages, Sampling(**sampling))))
    return "".join(c.text for c in chunks if c.kind == "text"), chunks[-1].usage, chunks


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def stream(client, text: str, max_tokens: int, seed: int, times: dict, key: str) -> None:
    events = client.chat.completions.create(model="starter", messages=user(text), max_tokens=max_tokens, seed=seed,
                                            temperature=0.8, stream=True)
    pieces = []
    for event in events:
        if event.choices and event.choices[0].delta.content:
            times.setdefault(f"{key}_first", time.monotonic())
            pieces.append(event.choices[0].delta.content)
        if event.choices and event.choices[0].finish_reason:
            times[f"{key}_finish"] = event.choices[0].finish_reason
    times[f"{key}_end"] = time.monotonic()
    times[key] = "".join(pieces)


def test_a_second_client_is_answered_while_the_first_still_streams(client):
    story, question = "Write a long story about a lighthouse keeper and a storm.", "What is two plus two?"
    alone: dict = {}
    stream(client, story, 60, 7, alone, "story")
    stream(client, question, 8, 3, alone, "question")
    times: dict = {}
    first = threading.Thread(target=stream, args=(client, story, 60, 7, times, "story"))
    first.start()
    wait_until(lambda: "story_first" in times, 120)
    stream(client, question, 8, 3, times, "question")
    first.join()
    assert times["question_first"] < times["story_end"]  # one request no longer waits for the other's reply
    assert times["question_end"] < times["story_end"]
    # each slot decodes as it would alone: the same seed gives the same text with company
    assert (times["story"], times["story_finish"]) == (alone["story"], alone["story_finish"])
    assert (times["question"], times["question_finish"]) == (alone["question"], alone["question_finish"])


def test_turn_two_reuses_turn_one_and_two_conversations_keep_their_slots(runtime):
    a = [{"role": "system", "content": SYSTEM}, *user("When was the first lighthouse built?")]
    b = user("Give me a recipe for a tomato soup with basil, for four people.")
    a_text, a1, _ = chat(runtime, a, max_tokens=12, seed=1)
    b_text, b1, _ = chat(runtime, b, max_tokens=12, seed=1)
    # alternating: each conversation's second turn finds its first turn still cached in its own slot
    a += [{"role": "assistant", "content": a_text}, *user("And who kept it?")]
    b += [{"role": "assistant", "content": b_text}, *user("Can I use dried basil?")]
    _, a2, _ = chat(runtime, a, max_tokens=4, seed=1)
    _, b2, _ = chat(runtime, b, max_tokens=4, seed=1)
    assert a2.cached_tokens >= a1.prompt_tokens
    assert b2.cached_tokens >= b1.prompt_tokens
    assert a2.prompt_tokens - a2.cached_tokens < a2.prompt_tokens / 3


def test_a_prefix_held_by_a_busy_slot_is_copied_not_evaluated_again(runtime):
    from fireside.engine.runner.decode import common_prefix

    first = [{"role": "system", "content": SYSTEM}, *user("Tell me everything about lenses, at length.")]
    second = [{"role": "system", "content": SYSTEM}, *user("Is the museum open on Sundays?")]
    tokens = [runtime.tokenize("starter", runtime.render_prompt("starter", ChatRequest(m))) for m in (first, second)]
    shared = common_prefix(*tokens)
    assert shared > 64  # the system turn
    running = runtime.chat("starter", ChatRequest(first, Sampling(max_tokens=60, seed=2)))
    next(c for c in running if c.kind == "text")  # the first request now holds a slot, mid-reply
    text, usage, _ = chat(runtime, second, max_tokens=6, seed=2)
    assert next(running).kind == "text"  # served beside the first, which is still replying
    running.close()
    assert usage.cached_tokens >= shared  # copied from the busy slot into the idle one
    again, _, _ = chat(runtime, second, max_tokens=6, seed=2)
    assert text == again  # and what was copied is the prefix itself: the reply reads as it does from its own cache


def test_three_conversations_over_two_slots_resume_with_their_prefixes(unused_cache):
    """A new conversation sharing the system prompt overwrites the slot used longest ago, never the one
    being talked in (before, every slot matched it by the system prompt and slot 0 won the tie): each
    conversation's next turn finds its history in its slot, and the one that lost its slot resumes from
    the prompt cache on disk. Each round makes the other slot the recent one, so slot 0 is in use once."""
    from fireside.engine.runner import kvcache

    system = [{"role": "system", "content": SYSTEM}]
    talks = {name: [*system, *user(q)] for name, q in
             (("a", "Which room has the lens?"), ("b", "My grandmother kept this lighthouse in the fifties and left a "
              "logbook and three photographs of the lamp room; would the museum like them, and whom do I ask?"),
              ("c", "Is there a cafe?"),
              ("d", "How tall is the tower?"))}
    last: dict = {}

    def say(name: str, follow_up: str | None = None):
        if follow_up:
            talks[name] += [{"role": "assistant", "content": last[name][0]}, *user(follow_up)]
        text, usage, _ = chat(unused_cache, talks[name], max_tokens=8, temperature=0)
        last[name] = (text, usage)
        return usage

    say("a")
    b1 = say("b")
    folder = unused_cache.settings.prompt_cache_dir  # b's first turn on disk before it loses its slot (a's is shorter)
    wait_until(lambda: any(e.n_tokens >= b1.prompt_tokens for e in kvcache.entries(folder)), 30)
    for ours, new in (("a", "c"), ("c", "d")):  # slots: ours and another; ours is talked in last
        before = say(ours, "Tell me more.")
        fresh = say(new)
        assert fresh.cached_tokens >= len(system[0]["content"]) // 8  # the system prompt was copied, not evaluated
        after = say(ours, "Thanks, and then?")
        assert after.restored_tokens == 0  # its own slot still held it
        assert after.cached_tokens >= before.prompt_tokens, (ours, new)
    b2 = say("b", "What about cats?")  # b lost its slot to c: its history comes back from disk
    assert b2.restored_tokens >= b1.prompt_tokens


def test_logprobs_at_temperature_zero_name_the_sampled_token_first(runtime):
    text, usage, chunks = chat(runtime, user("List the planets of the solar system."), max_tokens=16,
                               temperature=0, repeat_penalty=1.0, logprobs=5)
    entries = [lp for c in chunks if c.kind == "text" for lp in (c.logprobs or [])]
    assert len(entries) == usage.completion_tokens == 16
    assert "".join(e.token for e in entries) == text
    for e in entries:
        assert len(e.top) == 5
        assert (e.top[0][0], e.top[0][1]) == (e.token, pytest.approx(e.logprob))  # greedy took the top token
        assert e.logprob <= 0 and all(lp <= 0 for _, lp in e.top)
        assert [lp for _, lp in e.top] == sorted((lp for _, lp in e.top), reverse=True)
    plain = chat(runtime, user("List the planets of the solar system."), max_tokens=4, temperature=0)[2]
    assert all(c.logprobs is None for c in plain)  # only when asked

"""Speculative decoding on the real SmolLM2 (runner/drafts.py): prompt-lookup drafts and a
request's prediction change how fast a reply comes, never what it says. Greedy replies are compared
token for token with drafting on and off, seeded sampled replies too, four slots draft at once, and
OpenAI's ``accepted_prediction_tokens`` reach the real ``openai`` client.

Each compared pair runs with the prompt in the same cache state (evaluated once before, only its last
token again): a prompt evaluated cold and one evaluated after a cached prefix differ in llama.cpp's
numerics, and so, on near ties, in their text, drafting or not (batch.py)."""

from __future__ import annotations

import threading

import openai
import pytest

from fireside.engine.models.fitplan import LoadOptions
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.server import ServerThread, create_app
from fireside.engine.settings import Settings
from fireside.engine.types import ChatRequest, CompletionRequest, Sampling

pytestmark = pytest.mark.model

CODE = '''def area(width, height):
    """Return the area of a rectangle."""
    return width * height


def perimeter(width, height):
    return 2 * (width + height)
'''
POEM = ("The fog comes\non little cat feet.\n\nIt sits looking\nover harbor and city\n"
        "on silent haunches\nand then moves on.")
LIST = "apples, pears, plums, cherries, apricots, peaches, figs, dates, grapes, melons"

PROMPTS = [
    f"Repeat this code exactly:\n{CODE}",
    f"Rename the function area to surface in this code and return all of it:\n{CODE}",
    f"Add a docstring to perimeter and return the whole code:\n{CODE}",
    f"Repeat this poem word for word:\n{POEM}",
    f"Write this poem in capital letters:\n{POEM}",
    f"Quote the second stanza of this poem:\n{POEM}",
    f"Copy this list: {LIST}",
    f"Sort this list alphabetically: {LIST}",
    f"Write this list as a numbered list: {LIST}",
    "Count from one to twenty in words.",
    "List the days of the week, then list them again.",
    "Write the alphabet with commas between the letters.",
    "Write a short story about a lighthouse keeper.",
    "What is the capital of France?",
    "Explain what a hash table is.",
    "Give me three tips for sleeping well.",
    "Write a haiku about autumn rain.",
    "What is 17 times 23?",
    "Translate 'good morning, my friend' into French.",
    "Write a Python function that reverses a string.",
    "Write a SQL query that counts the rows of a table named users.",
    "Write a JSON object with the keys name, age and city.",
    "Describe the water cycle in two sentences.",
    "Say 'hello world' five times.",
    "Repeat after me: the quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog.",
    "Write an HTML page with a title and one paragraph.",
    "Name four planets of the solar system.",
    "Summarize: The museum opens at nine, closes at five, and is closed on Mondays.",
    "Fix the typo: 'The wether is nice todya.'",
    "Write a limerick about a cat.",
]
MAX_TOKENS = 16


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path_factory.mktemp("drafts"))})
    settings.ensure_dirs()
    rt = Runtime(settings, idle_ttl_s=0)
    rt.load("starter", LoadOptions(context=1024, parallel=4, drafts=True))
    yield rt
    rt.close()


def chat(runtime, text, prediction=None, drafts=None, **sampling):
    request = ChatRequest([{"role": "user", "content": text}], Sampling(**sampling), prediction=prediction,
                          drafts=drafts)
    chunks = list(runtime.chat("starter", request))
    return "".join(c.text for c in chunks if c.kind == "text"), chunks[-1].usage


def edited(text: str) -> str:
    """The reply as a prediction after an edit, as coding tools send it: changed in two places."""
    third = len(text) // 3
    return text[:third] + "XYZ" + text[third + 2:2 * third] + " nothing " + text[2 * third + 1:]


@pytest.mark.parametrize("text", PROMPTS, ids=range(len(PROMPTS)))
def test_greedy_replies_are_the_same_token_for_token_with_drafts_on_and_off(runtime, text):
    chat(runtime, text, drafts=False, temperature=0, max_tokens=1)  # the prompt, cached: see the docstring
    off, off_usage = chat(runtime, text, drafts=False, temperature=0, max_tokens=MAX_TOKENS)
    on, usage = chat(runtime, text, temperature=0, max_tokens=MAX_TOKENS)  # prompt lookup, where it hits
    assert on == off
    assert (usage.completion_tokens, off_usage.draft_tokens) == (off_usage.completion_tokens, 0)
    with_prediction, predicted = chat(runtime, text, prediction=edited(off), temperature=0, max_tokens=MAX_TOKENS)
    assert with_prediction == off
    if off_usage.completion_tokens == MAX_TOKENS:  # an edit can spoil all of a very short reply's prediction
        assert predicted.draft_tokens > 0
    assert predicted.rejected_prediction_tokens == predicted.draft_tokens - predicted.accepted_draft_tokens


def test_prompt_lookup_drafts_a_repeated_passage(runtime):
    def complete(drafts, max_tokens):
        sampling = Sampling(temperature=0, repeat_penalty=1.0, max_tokens=max_tokens)  # a penalty fights repeating
        chunks = list(runtime.complete("starter", CompletionRequest(f"{POEM}\n\n{POEM}\n\n", sampling, drafts=drafts)))
        return "".join(c.text for c in chunks if c.kind == "text"), chunks[-1].usage

    complete(False, 1)
    off, _ = complete(False, 40)
    on, usage = complete(None, 40)
    assert on == off
    assert usage.accepted_draft_tokens >= 20  # the third copy of the poem came mostly from drafts
    assert usage.accepted_prediction_tokens == usage.rejected_prediction_tokens == 0  # no prediction was sent


def test_seeded_sampled_replies_are_reproducible_with_drafts(runtime):
    for seed, text in enumerate(PROMPTS[:8]):
        kw = {"temperature": 0.8, "seed": seed, "max_tokens": MAX_TOKENS}
        chat(runtime, text, drafts=False, **{**kw, "max_tokens": 1})
        off, _ = chat(runtime, text, drafts=False, **kw)
        on, usage = chat(runtime, text, prediction=off, **kw)
        assert on == off, text
        assert usage.accepted_prediction_tokens > 0  # drafts were verified under sampling, and taken
        again, _ = chat(runtime, text, prediction=off, **kw)
        assert again == on


def test_four_slots_draft_at_once_and_each_reply_keeps_its_text(runtime):
    texts = PROMPTS[:4]
    for text in texts:
        chat(runtime, text, drafts=False, temperature=0, max_tokens=1)
    alone = [chat(runtime, text, drafts=False, temperature=0, max_tokens=MAX_TOKENS)[0] for text in texts]
    results: dict[int, tuple] = {}

    def ask(i: int) -> None:
        results[i] = chat(runtime, texts[i], prediction=edited(alone[i]), temperature=0, max_tokens=MAX_TOKENS)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert [results[i][0] for i in range(4)] == alone
    assert all(results[i][1].accepted_prediction_tokens > 0 for i in range(4))


def test_accepted_prediction_tokens_reach_the_openai_client(runtime):
    thread = ServerThread(create_app(runtime, runtime.settings), "127.0.0.1", 0)
    thread.start()
    try:
        client = openai.OpenAI(base_url=f"{thread.url}/v1", api_key="x", max_retries=0)
        messages = [{"role": "user", "content": PROMPTS[0]}]
        client.chat.completions.create(model="starter", messages=messages, temperature=0, max_tokens=1)  # cached
        plain = client.chat.completions.create(model="starter", messages=messages, temperature=0, max_tokens=40)
        expected = plain.choices[0].message.content
        assert plain.usage.completion_tokens_details.accepted_prediction_tokens == 0
        reply = client.chat.completions.create(
            model="starter", messages=messages, temperature=0, max_tokens=40,
            prediction={"type": "content", "content": [{"type": "text", "text": edited(expected)}]})
        details = reply.usage.completion_tokens_details
        assert reply.choices[0].message.content == expected
        assert details.accepted_prediction_tokens > reply.usage.completion_tokens // 2
        assert details.rejected_prediction_tokens > 0  # the edits' drafts were refused
        timings = reply.model_extra["timings"]  # llama-server's, for tools made for it
        assert timings["draft_n_accepted"] == details.accepted_prediction_tokens
        assert timings["draft_n"] == details.accepted_prediction_tokens + details.rejected_prediction_tokens
        assert timings["predicted_n"] == reply.usage.completion_tokens
    finally:
        thread.stop()



def _chi_square_critical(df: int, alpha_z: float = 3.09) -> float:
    """The chi-square value a statistic with ``df`` degrees of freedom exceeds with probability about
    0.001 (``alpha_z``: the normal quantile), by Wilson and Hilferty's approximation."""
    return df * (1 - 2 / (9 * df) + alpha_z * (2 / (9 * df)) ** 0.5) ** 3


def test_sampled_replies_keep_their_distribution_with_drafts(runtime):
    """Speculative sampling keeps the model's distribution: 120 sampled replies with a prediction to
    draft from and 150 without, with different seeds (independent draws), give the same frequencies of
    their second and third tokens (the ones drafts are verified for) within a chi-square bound (p 0.001).
    Its power is modest: with every draft taken unchecked, it measured 24.4 against a bound of 20.7;
    correct, 6.2 against 18.7."""
    from collections import Counter

    text, n = "Name a color and say why you like it.", 120
    chat(runtime, text, drafts=False, temperature=0, max_tokens=1)
    greedy, _ = chat(runtime, text, drafts=False, temperature=0, max_tokens=8)

    def sample(seed: int, prediction: str | None) -> str:
        request = ChatRequest([{"role": "user", "content": text}], Sampling(temperature=1.0, seed=seed, max_tokens=3),
                              prediction=prediction, drafts=prediction is not None)
        chunks = [c for c in runtime.chat("starter", request)]
        pieces = [c.text for c in chunks if c.kind == "text"]
        return "".join(pieces[1:3]), chunks[-1].usage

    plain = Counter(sample(seed, None)[0] for seed in range(n))
    drafted, verified = Counter(), 0
    for seed in range(n, 2 * n):
        second_third, usage = sample(seed, greedy)
        drafted[second_third] += 1
        verified += usage.draft_tokens
    assert verified > n // 4  # drafts were put to the sampler (one a reply at most), and it took or refused them
    common = [k for k in plain | drafted if plain[k] + drafted[k] >= 10]  # each expected count >= 5
    rows = [(plain[k], drafted[k]) for k in common]
    rows.append((n - sum(r[0] for r in rows), n - sum(r[1] for r in rows)))  # the rest, pooled
    rows = [r for r in rows if sum(r)]
    statistic = sum((a - b) ** 2 / (a + b) for a, b in rows)  # two samples of equal size
    assert len(rows) >= 3, rows  # the replies vary: the test can tell distributions apart
    assert statistic < _chi_square_critical(len(rows) - 1), (statistic, rows)

"""Ollama ``options`` typed as Ollama types them (issue 27, item 5).

Ollama reads ``options`` into a Go struct and answers 400 for a string where a number belongs
(``num_ctx: "big"``) or a number where a boolean belongs: so does Fireside, naming the option, through
the official ``ollama`` client (which sends ``options`` as given), for chat and generate, the load
settings it ignores included. Correctly typed load settings, fractional integers (Ollama cuts the
fraction) and options Ollama does not know still answer.
"""

from __future__ import annotations

import ollama
import pytest

HI = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def oll(base_url):
    return ollama.Client(host=base_url, timeout=300)


@pytest.mark.parametrize(("option", "value"), [
    ("num_ctx", "big"), ("temperature", "hot"), ("temperature", "0.5"), ("top_k", "40"), ("num_gpu", True),
    ("num_thread", [4]), ("num_batch", "512"), ("use_mmap", "yes"), ("numa", 1), ("penalize_newline", 0),
    ("tfs_z", "1.0"), ("num_keep", False), ("stop", [1]),
])
def test_an_option_of_the_wrong_type_is_a_400_naming_it(oll, option, value):
    for send in (lambda o: oll.chat(model="starter", messages=HI, options=o, stream=False),
                 lambda o: oll.generate(model="starter", prompt="hi", options=o, stream=False)):
        with pytest.raises(ollama.ResponseError) as err:
            send({option: value})
        assert err.value.status_code == 400
        assert err.value.error.startswith(f"options.{option}"), err.value.error


@pytest.mark.model
def test_load_settings_of_the_right_type_and_unknown_options_still_answer(oll):
    options = {"num_ctx": 2048.9, "num_batch": 512, "num_gpu": 0, "main_gpu": 0, "num_thread": 2, "numa": False,
               "use_mmap": True, "use_mlock": False, "num_keep": 4, "tfs_z": 1, "penalize_newline": True,
               "no_such_option": "whatever", "num_predict": 3, "temperature": 0}
    reply = oll.generate(model="starter", prompt="hi", options=options, stream=False)
    assert reply.done and reply.eval_count == 3

"""Model names as a new user meets them: one naming rule for every source, the quantization from the
GGUF header, other apps' folders found where those apps keep them, and the names an older Fireside
gave still working (library, CLI and API)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from gguf import GGMLQuantizationType, LlamaFileType

from fireside.engine.library import Library, imports
from fireside.engine.library.resolve import resolve_model
from tests.helpers.gguf_builder import write_model

Q = GGMLQuantizationType


def gguf(path: Path, quant: str) -> Path:
    """A small GGUF whose header declares ``quant``; the tensors are of that type where the tiny shape
    allows it (a 32-wide block), else Q8_0."""
    tensors = getattr(Q, quant) if quant in ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0") else Q.Q8_0
    return write_model(path, weight=tensors, output=tensors, file_type=LlamaFileType[f"MOSTLY_{quant}"])


def _hub(home: Path, library: Library):
    """What ``Hub.pull`` leaves: the file at its destination, recorded as from the hub."""
    repo, name = "bartowski/Llama-3.2-1B-Instruct-GGUF", "Llama-3.2-1B-Instruct-Q4_K_M.gguf"
    dest = gguf(library.destination(repo, name), "Q4_K_M")
    library.record(dest, "hub", f"{repo}@abc/{name}")
    return library.by_path(dest)


def _lmstudio(home: Path, library: Library):
    gguf(home / ".lmstudio/models/lmstudio-community/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0.gguf", "Q8_0")
    return _import("lmstudio", home, library)


def _ollama(home: Path, library: Library):
    root = home / ".ollama/models"
    src = gguf(home / "tmp.gguf", "Q4_0")
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    (root / "blobs").mkdir(parents=True)
    src.rename(root / "blobs" / f"sha256-{digest}")
    manifest = root / "manifests/registry.ollama.ai/library/llama3.2/1b-instruct-q4_0"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"layers": [
        {"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{digest}", "size": 1}]}))
    return _import("ollama", home, library)


def _hf_cache(home: Path, library: Library):
    repo = home / ".cache/huggingface/hub/models--unsloth--gemma-3-1b-it-GGUF"
    gguf(repo / "blobs/b1", "Q4_K_M")
    (repo / "snapshots/rev1").mkdir(parents=True)
    (repo / "snapshots/rev1/gemma-3-1b-it-Q4_K_M.gguf").symlink_to("../../blobs/b1")
    return _import("hf-cache", home, library)


def _gpt4all(home: Path, library: Library):
    gguf(home / ".local/share/nomic.ai/GPT4All/Llama-3.2-1B-Instruct-Q4_0.gguf", "Q4_0")
    return _import("gpt4all", home, library)


def _jan(home: Path, library: Library):
    gguf(home / ".local/share/Jan/data/llamacpp/models/qwen3-0.6b/model.gguf", "Q4_K_M")
    return _import("jan", home, library)


def _by_hand(home: Path, library: Library):
    return library.add_file(gguf(home / "Downloads/Phi-3-mini-4k-instruct.gguf", "Q5_K_M"))


def _import(app: str, home: Path, library: Library):
    found = imports.find(app, imports.default_locations(app, home=home, environ={}))
    [(_, model)] = imports.import_found(library, found)
    assert not isinstance(model, str), model
    return model


# source, how the user got the model, its id, its alias
SOURCES = [
    ("hub pull", _hub, "bartowski/Llama-3.2-1B-Instruct-GGUF/Llama-3.2-1B-Instruct-Q4_K_M",
     "llama-3.2-1b-instruct:q4_k_m"),
    ("LM Studio", _lmstudio, "lmstudio-community/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0", "qwen3-0.6b:q8_0"),
    ("Ollama", _ollama, "ollama/llama3.2/1b-instruct-q4_0", "llama3.2:1b-instruct-q4_0"),
    ("HF cache", _hf_cache, "unsloth/gemma-3-1b-it-GGUF/gemma-3-1b-it-Q4_K_M", "gemma-3-1b-it:q4_k_m"),
    ("GPT4All", _gpt4all, "gpt4all/Llama-3.2-1B-Instruct-Q4_0", "llama-3.2-1b-instruct:q4_0"),
    ("Jan", _jan, "jan/qwen3-0.6b", "qwen3-0.6b:q4_k_m"),
    ("by hand", _by_hand, "local/Phi-3-mini-4k-instruct", "phi-3-mini-4k-instruct:q5_k_m"),
]


@pytest.mark.parametrize("source,make,expected_id,alias", SOURCES, ids=[s[0] for s in SOURCES])
def test_every_source_gets_a_short_id_and_a_name_tag_alias(library, tmp_path, source, make, expected_id, alias):
    model = make(tmp_path / "home", library)
    assert (model.id, model.aliases) == (expected_id, [alias])
    parts = model.id.lower().split("/")
    assert all(a != b for a, b in zip(parts, parts[1:])) and "model" not in parts  # nothing repeated or empty
    assert library.get(alias).id == expected_id and resolve_model(alias, library.settings) == model.path


def test_all_sources_together_keep_their_aliases(library, tmp_path):
    models = [make(tmp_path / "home", library) for _, make, _, _ in SOURCES]
    listed = {m.id: m.aliases for m in library.list()}
    assert [listed[m.id] for m in models] == [[alias] for *_, alias in SOURCES]


def test_a_renamed_quantization_is_listed_by_its_header(settings, library, tmp_path, capsys):
    from fireside.engine.cli import main

    # GPT4All's name says Q4_0; the header and the tensors say Q4_1
    home = tmp_path / "home"
    gguf(home / ".local/share/nomic.ai/GPT4All/Llama-3.2-1B-Instruct-Q4_0.gguf", "Q4_1")
    model = _import("gpt4all", home, library)
    assert model.quant == "Q4_1" and model.aliases == ["llama-3.2-1b-instruct:q4_1"]
    # so is a file in the models folder under a wrong name
    gguf(settings.models_dir / "pub/Thing-GGUF/Thing-Q8_0.gguf", "Q5_0")
    assert main(["ls", "--json"]) == 0
    quants = {m["id"]: m["quant"] for m in json.loads(capsys.readouterr().out)}
    assert quants[model.id] == "Q4_1" and quants["pub/Thing-GGUF/Thing-Q8_0"] == "Q5_0"


def test_gpt4all_and_jan_are_found_under_xdg_data_home(settings, tmp_path, monkeypatch, capsys):
    from fireside.engine.cli import main

    home, data = tmp_path / "home", tmp_path / "elsewhere/data"
    g = gguf(data / "nomic.ai/GPT4All/Phi-3-mini-Q4_0.gguf", "Q4_0")
    j = gguf(data / "Jan/data/llamacpp/models/qwen3-0.6b/model.gguf", "Q8_0")
    gguf(home / ".local/share/nomic.ai/GPT4All/Ignored-Q4_0.gguf", "Q4_0")  # where XDG_DATA_HOME says not to look
    env = {"XDG_DATA_HOME": str(data)}
    assert [f.path for f in imports.find("gpt4all", imports.default_locations("gpt4all", home=home, environ=env))] == [g]
    assert [f.path for f in imports.find("jan", imports.default_locations("jan", home=home, environ=env))] == [j]

    monkeypatch.setenv("HOME", str(home))  # as the user runs it: the environment is read
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    assert main(["import", "--from", "gpt4all"]) == 0 and main(["import", "--from", "jan"]) == 0
    assert {m.id for m in Library(settings).list()} >= {"gpt4all/Phi-3-mini-Q4_0", "jan/qwen3-0.6b"}
    assert "Ignored" not in capsys.readouterr().out


def test_jan_is_found_in_the_data_folder_its_settings_name(tmp_path):
    home, data, moved = tmp_path / "home", tmp_path / "data", tmp_path / "big-disk/jan"
    j = gguf(moved / "llamacpp/models/qwen3-0.6b/model.gguf", "Q8_0")
    (data / "jan.ai.app").mkdir(parents=True)
    (data / "jan.ai.app/settings.json").write_text(json.dumps({"data_folder": str(moved), "quick_ask": False}))
    env = {"XDG_DATA_HOME": str(data)}
    assert [f.path for f in imports.find("jan", imports.default_locations("jan", home=home, environ=env))] == [j]


def _old_layout_imports(settings, tmp_path, smollm2_path=None):
    """Imports as an older Fireside left them in the models folder (the links are where they were)."""
    gpt = tmp_path / "gpt4all/SmolLM2-135M-Instruct-Q4_1.gguf"
    gpt.parent.mkdir(parents=True)
    if smollm2_path:
        os.symlink(smollm2_path, gpt)
    else:
        gguf(gpt, "Q4_1")
    jan = gguf(tmp_path / "jan/qwen3-0.6b/model.gguf", "Q8_0")
    library = Library(settings)
    library.add_file(gpt, publisher="gpt4all", repo="SmolLM2-135M-Instruct-Q4_1", app="gpt4all")
    library.add_file(jan, publisher="jan", repo="qwen3-0.6b", app="jan")
    return library


OLD_GPT4ALL = "gpt4all/SmolLM2-135M-Instruct-Q4_1/SmolLM2-135M-Instruct-Q4_1"


def test_old_ids_and_aliases_still_resolve(settings, tmp_path):
    library = _old_layout_imports(settings, tmp_path)
    assert {m.id: m.aliases for m in library.list() if m.source == "import"} == {
        "gpt4all/SmolLM2-135M-Instruct-Q4_1": ["smollm2-135m-instruct:q4_1"], "jan/qwen3-0.6b": ["qwen3-0.6b:q8_0"]}
    for old, new in [(OLD_GPT4ALL, "gpt4all/SmolLM2-135M-Instruct-Q4_1"),
                     ("jan/qwen3-0.6b/model", "jan/qwen3-0.6b"), ("qwen3-0.6b:model", "jan/qwen3-0.6b")]:
        assert library.get(old).id == new
        assert resolve_model(old, settings) == library.get(new).path
    removed = library.remove("jan/qwen3-0.6b/model")  # what a user wrote in a script keeps working
    assert removed.id == "jan/qwen3-0.6b" and (tmp_path / "jan/qwen3-0.6b/model.gguf").is_file()


def test_old_id_runs_from_the_cli_and_answers_on_the_api(settings, tmp_path, smollm2_path, capsys):
    import ollama

    from fireside.engine.cli import main
    from tests.helpers.serve import serve

    _old_layout_imports(settings, tmp_path, smollm2_path)
    # `fireside run` loads through the runtime's resolver, the path the app's picker takes too
    assert main(["run", OLD_GPT4ALL, "Say hi.", "--max-tokens", "3", "--temperature", "0"]) == 0
    assert capsys.readouterr().out.strip()
    with serve(Path(os.environ["FIRESIDE_HOME"])) as url:
        shown = ollama.Client(host=url).show(OLD_GPT4ALL)
        assert shown.modelfile.startswith("FROM gpt4all/SmolLM2-135M-Instruct-Q4_1\n")
        names = [m.model for m in ollama.Client(host=url).list().models]
        assert "gpt4all/SmolLM2-135M-Instruct-Q4_1" in names and OLD_GPT4ALL not in names

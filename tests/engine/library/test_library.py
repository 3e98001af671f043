"""The model library: ids and aliases, the index, split sets, removal, path safety and imports in place."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fireside.engine.errors import InvalidModelFile, ModelNotFound, UnsafePath
from fireside.engine.library import Library, imports
from fireside.engine.library.paths import check_file_name, check_repo_id, safe_join
from fireside.engine.library.resolve import resolve_model
from tests.helpers.gguf_builder import build_gguf, split_gguf
from tests.helpers.vision_model import write_projector


def test_ids_aliases_and_cached_inspection(settings, library, monkeypatch):
    path = build_gguf(settings.models_dir / "bartowski/SmolLM2-135M-Instruct-GGUF/SmolLM2-135M-Instruct-Q4_1.gguf",
                      n_layers=3)
    model = library.get("bartowski/SmolLM2-135M-Instruct-GGUF/SmolLM2-135M-Instruct-Q4_1")
    assert model.path == path and model.info.block_count == 3 and model.source == "local"
    assert model.aliases == ["smollm2-135m-instruct:q4_1"]
    assert library.get("smollm2-135m-instruct:q4_1").id == model.id

    # a second listing answers from the index without reading any file
    import fireside.engine.library.library as lib_mod

    monkeypatch.setattr(lib_mod, "inspect_file", lambda p: pytest.fail(f"re-inspected {p}"))
    assert [m.id for m in Library(settings).list() if m.id != "starter"] == [model.id]


def test_changed_file_is_reinspected_and_deleted_file_leaves_the_index(settings, library):
    path = build_gguf(settings.models_dir / "pub/repo/Model-Q8_0.gguf", n_layers=2)
    assert library.get("pub/repo/Model-Q8_0").info.block_count == 2
    build_gguf(path, n_layers=5, payload_bytes=1024)
    assert library.get("pub/repo/Model-Q8_0").info.block_count == 5
    path.unlink()
    with pytest.raises(ModelNotFound):
        library.get("pub/repo/Model-Q8_0")
    assert str(path) not in library.index.rows()


def test_colliding_aliases_get_a_suffix_and_the_first_keeps_its_alias(settings, library):
    build_gguf(settings.models_dir / "alice/x-GGUF/Foo-Q4_0.gguf")
    assert library.get("foo:q4_0").id == "alice/x-GGUF/Foo-Q4_0"
    build_gguf(settings.models_dir / "bob/x-GGUF/Foo-Q4_0.gguf", seed=1)
    aliases = {m.id: m.aliases for m in library.list()}
    assert aliases["alice/x-GGUF/Foo-Q4_0"] == ["foo:q4_0"]  # adding bob's did not take it away
    assert aliases["bob/x-GGUF/Foo-Q4_0"] == ["foo:q4_0-2"]
    assert library.get("foo:q4_0").id == "alice/x-GGUF/Foo-Q4_0"
    # the publisher-prefixed aliases an older Fireside gave the pair still find each
    assert library.get("bob/foo:q4_0").id == "bob/x-GGUF/Foo-Q4_0"


def test_split_set_is_one_model_and_projector_is_tied(settings, library):
    folder = settings.models_dir / "pub/Big-GGUF"
    parts = split_gguf(folder, "Big-Q8_0", count=3, n_layers=6)
    write_projector(folder / "mmproj-Big-f16.gguf", n_embd_text=64, file_type=1)  # Big is 64 wide
    (folder / "Other-Q4_0.gguf.part").write_bytes(b"partial download")
    models = [m for m in library.list() if m.source != "starter"]
    assert [m.id for m in models] == ["pub/Big-GGUF/Big-Q8_0"]
    big = models[0]
    assert big.files == parts and big.size == sum(p.stat().st_size for p in parts)
    assert big.info.block_count == 6 and big.projector == folder / "mmproj-Big-f16.gguf"


def test_a_projector_is_paired_by_its_header_not_its_name(settings, library):
    folder = settings.models_dir / "pub/Family-GGUF"
    build_gguf(folder / "Family-Small-Q8_0.gguf", n_embd=64)
    build_gguf(folder / "Family-Large-Q8_0.gguf", n_embd=128, seed=1)
    write_projector(folder / "mmproj-Family-Large-f16.gguf", n_embd_text=64, file_type=1)  # named for Large, fits Small
    write_projector(folder / "mmproj-Family-Small-q8_0.gguf", n_embd_text=128, file_type=7)  # and the other way round
    write_projector(folder / "mmproj-Family-Small-f32.gguf", n_embd_text=128, file_type=0)
    build_gguf(folder / "mmproj-not-a-projector.gguf", n_embd=64, seed=2)  # a llama file, whatever its name
    models = {m.id.rsplit("/", 1)[1]: m for m in library.list() if m.source != "starter"}
    assert set(models) == {"Family-Small-Q8_0", "Family-Large-Q8_0"}  # projectors are never listed as models
    assert models["Family-Small-Q8_0"].projector == folder / "mmproj-Family-Large-f16.gguf"
    assert models["Family-Large-Q8_0"].projector == folder / "mmproj-Family-Small-q8_0.gguf"  # Q8_0 before F32


def test_ls_says_which_models_read_images(settings, library, capsys):
    from fireside.engine.cli import main

    folder = settings.models_dir / "pub/Vis-GGUF"
    build_gguf(folder / "Vis-Q8_0.gguf", n_embd=64)
    proj = write_projector(folder / "mmproj-Vis-f16.gguf", n_embd_text=64, file_type=1)
    build_gguf(settings.models_dir / "pub/Text-GGUF/Text-Q8_0.gguf", n_embd=64, seed=4)
    assert main(["ls"]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[2:]}
    assert rows["pub/Vis-GGUF/Vis-Q8_0"].rstrip().endswith("vision")
    assert rows["pub/Text-GGUF/Text-Q8_0"].rstrip().endswith("text")
    assert main(["ls", "--json"]) == 0
    listed = {m["id"]: m for m in json.loads(capsys.readouterr().out)}
    assert listed["pub/Vis-GGUF/Vis-Q8_0"]["projector"] == str(proj)


def test_invalid_file_is_not_listed(settings, library):
    bad = settings.models_dir / "pub/repo/Broken-Q4_0.gguf"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"GGUF" + b"\xff" * 64)
    assert [m for m in library.list() if m.source != "starter"] == []


@pytest.mark.parametrize("ref", ["../x", "/etc/passwd", "C:\\x", "C:", "a/../../b", "\\\\server\\share\\x",
                                 "x\x00y", "./x", "~/x", "a//b", "x" * 600])
def test_path_like_ids_are_never_files(settings, library, tmp_path, monkeypatch, ref):
    outside = tmp_path / "x.gguf"
    build_gguf(outside)
    monkeypatch.chdir(settings.models_dir)  # so a relative path would resolve to a real file if treated as one
    (settings.models_dir / "x.gguf").symlink_to(outside)
    with pytest.raises(ModelNotFound):
        library.get(ref)


def test_symlink_out_of_the_root_is_ignored_unless_imported(settings, library, tmp_path):
    outside = build_gguf(tmp_path / "elsewhere/Secret-Q4_0.gguf")
    planted = settings.models_dir / "evil/repo/Secret-Q4_0.gguf"
    planted.parent.mkdir(parents=True)
    planted.symlink_to(outside)
    assert [m.id for m in library.list() if m.source != "starter"] == []
    with pytest.raises(ModelNotFound):
        library.get("evil/repo/Secret-Q4_0")


def test_a_folder_symlink_out_of_the_root_is_refused_for_writes(settings, tmp_path):
    (settings.models_dir / "evil").symlink_to(tmp_path)
    with pytest.raises(UnsafePath):
        safe_join(settings.models_dir, "evil", "repo", "new.gguf")
    assert safe_join(settings.models_dir, "good", "repo", "new.gguf") == settings.models_dir / "good/repo/new.gguf"


@pytest.mark.parametrize("repo_id", ["../etc", "a/../../b", "/abs/x", "C:/x", "a\\b/c", "a/b/c", "a\x00/b",
                                     "a/" + "b" * 300, "..", "a/.."])
def test_unsafe_repo_ids_are_refused(repo_id):
    with pytest.raises(UnsafePath):
        check_repo_id(repo_id)


@pytest.mark.parametrize("name", ["../x.gguf", "a/../../x.gguf", "/etc/passwd", "C:\\x.gguf", "C:x.gguf",
                                  "\\\\srv\\share\\x.gguf", "x\x00.gguf", "x" * 300 + ".gguf", "", "a/./b.gguf"])
def test_unsafe_file_names_are_refused(name, library, settings):
    with pytest.raises(UnsafePath):
        check_file_name(name)
    with pytest.raises(UnsafePath):
        library.destination("pub/repo", name)
    assert not (settings.models_dir / "pub").exists()


def test_remove_deletes_files_and_empty_folders(settings, library):
    parts = split_gguf(settings.models_dir / "pub/Big-GGUF", "Big-Q8_0", count=2)
    removed = library.remove("big:q8_0")
    assert removed.id == "pub/Big-GGUF/Big-Q8_0"
    assert not any(p.exists() for p in parts) and not (settings.models_dir / "pub").exists()
    with pytest.raises(ModelNotFound):
        library.get("pub/Big-GGUF/Big-Q8_0")


def test_starter_is_listed_and_resolves(library, smollm2_path, settings):
    starter = library.get("starter")
    assert starter.path == smollm2_path and starter.source == "starter"
    assert starter.info.architecture == "llama"
    assert resolve_model("starter", settings) == smollm2_path


def test_resolve_model_accepts_library_ids_and_paths(settings, tmp_path):
    path = build_gguf(settings.models_dir / "pub/repo/Model-Q4_0.gguf")
    assert resolve_model("pub/repo/Model-Q4_0", settings) == path
    assert resolve_model("model:q4_0", settings) == path
    loose = build_gguf(tmp_path / "loose.gguf")
    assert resolve_model(str(loose), settings) == loose
    with pytest.raises(ModelNotFound):
        resolve_model("nothing:here", settings)


def _same_file_not_copied(link: Path, original: Path) -> bool:
    return link.is_symlink() and link.resolve() == original.resolve() or (
        link.stat().st_ino == original.stat().st_ino and link.stat().st_dev == original.stat().st_dev)


def test_add_file_links_in_place_and_remove_keeps_the_original(settings, library, tmp_path):
    original = build_gguf(tmp_path / "Downloads/My-Model-Q5_K_M.gguf")
    model = library.add_file(original)
    assert model.id == "local/My-Model/My-Model-Q5_K_M" and model.source == "import"  # Downloads names no model
    assert _same_file_not_copied(model.path, original)
    assert model.origin == f"file:{original}"
    library.remove(model.id)
    assert original.is_file() and not model.path.exists()


def test_a_file_imported_from_a_place_is_named_by_itself_and_from_a_model_folder_by_it(library, tmp_path):
    """Issue 45: /tmp/x.gguf got the id ``local/tmp/x``; a folder that is a place, not a model, names nothing."""
    assert library.add_file(build_gguf(tmp_path / "tmp/x.gguf")).id == "local/x"
    assert library.add_file(build_gguf(tmp_path / "Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0.gguf")).id == \
        "local/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q8_0"


def test_add_file_refuses_a_broken_file_before_linking(settings, library, tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf at all")
    with pytest.raises(InvalidModelFile):
        library.add_file(bad)
    assert list(settings.models_dir.iterdir()) == []


def _lmstudio(home: Path) -> Path:
    return build_gguf(home / ".lmstudio/models/lmstudio-community/Qwen-GGUF/Qwen-0.5B-Q4_K_M.gguf", seed=3)


def _ollama(home: Path) -> Path:
    root = home / ".ollama/models"
    blob_src = build_gguf(home / "tmp-ollama.gguf", seed=4, n_layers=4)
    import hashlib

    digest = hashlib.sha256(blob_src.read_bytes()).hexdigest()
    blob = root / "blobs" / f"sha256-{digest}"
    blob.parent.mkdir(parents=True)
    blob_src.rename(blob)
    manifest = root / "manifests/registry.ollama.ai/library/llama3.2/1b"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"schemaVersion": 2, "layers": [
        {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:" + "1" * 64, "size": 10},
        {"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{digest}", "size": 1}]}))
    return blob


def _hf_cache(home: Path) -> Path:
    repo = home / ".cache/huggingface/hub/models--TheBloke--Tiny-GGUF"
    blob = build_gguf(repo / "blobs/abc123", seed=5)
    snap = repo / "snapshots/rev1"
    snap.mkdir(parents=True)
    (snap / "tiny.Q2_K.gguf").symlink_to("../../blobs/abc123")
    (repo / "refs").mkdir()
    (repo / "refs/main").write_text("rev1")
    return blob


@pytest.mark.parametrize("app,make,expected_id,alias", [
    ("lmstudio", _lmstudio, "lmstudio-community/Qwen-GGUF/Qwen-0.5B-Q4_K_M", "qwen-0.5b:q4_k_m"),
    ("ollama", _ollama, "ollama/llama3.2/1b", "llama3.2:1b"),
    ("hf-cache", _hf_cache, "TheBloke/Tiny-GGUF/tiny.Q2_K", "tiny:q2_k"),
])
def test_import_from_other_apps_links_without_copying(settings, library, tmp_path, app, make, expected_id, alias):
    home = tmp_path / "userhome"
    original = make(home)
    before = original.stat()
    found = imports.find(app, imports.default_locations(app, home=home, environ={}))
    assert len(found) == 1
    [(f, model)] = imports.import_found(library, found)
    assert not isinstance(model, str), model
    assert model.id == expected_id and model.aliases == [alias]
    assert _same_file_not_copied(model.path, original)
    listed = {m.id: m for m in Library(settings).list()}
    assert listed[expected_id].info.architecture == "llama" and listed[expected_id].source == "import"
    library.remove(expected_id)
    assert original.is_file() and original.stat().st_size == before.st_size


def test_importing_a_vision_model_keeps_its_projector_and_removing_it_unlinks_both(settings, library, tmp_path):
    home = tmp_path / "userhome"
    folder = home / ".lmstudio/models/lmstudio-community/Vis-GGUF"
    original = build_gguf(folder / "Vis-Q8_0.gguf", n_embd=64)
    proj = write_projector(folder / "mmproj-Vis-f16.gguf", n_embd_text=64, file_type=1)
    write_projector(folder / "mmproj-Other-f16.gguf", n_embd_text=96, file_type=1)  # another model's: left behind
    found = imports.find("lmstudio", imports.default_locations("lmstudio", home=home, environ={}))
    [(_, model)] = imports.import_found(library, found)
    assert model.projector is not None and _same_file_not_copied(model.projector, proj)
    assert sorted(p.name for p in model.path.parent.iterdir()) == ["Vis-Q8_0.gguf", "mmproj-Vis-f16.gguf"]
    library.remove(model.id)
    assert not model.path.parent.exists()  # both links gone, the folder pruned
    assert original.is_file() and proj.is_file()  # the other app keeps its files


def test_import_falls_back_to_a_symlink_and_lists_it(settings, library, tmp_path, monkeypatch):
    original = build_gguf(tmp_path / "other-fs/Thing-Q4_0.gguf")

    def no_hard_links(src, dst):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", no_hard_links)
    model = library.add_file(original, publisher="gpt4all", repo="Thing")
    assert model.path.is_symlink() and model.path.resolve() == original.resolve()
    assert [m.id for m in library.list() if m.source == "import"] == ["gpt4all/Thing/Thing-Q4_0"]


def test_gpt4all_and_jan_layouts(tmp_path):
    build_gguf(tmp_path / "gpt4all/Phi-3-mini-Q4_0.gguf")
    build_gguf(tmp_path / "jan/mistral-7b/model.gguf")
    [g] = imports.find("gpt4all", [tmp_path / "gpt4all"])
    [j] = imports.find("jan", [tmp_path / "jan"])
    assert (g.publisher, g.repo, g.name) == ("gpt4all", "Phi-3-mini-Q4_0", "Phi-3-mini-Q4_0.gguf")
    assert (j.publisher, j.repo, j.name) == ("jan", "mistral-7b", "model.gguf")


def test_hostile_ollama_manifest_is_skipped(tmp_path):
    root = tmp_path / "ollama"
    manifest = root / "manifests/registry.ollama.ai/library/evil/latest"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"layers": [
        {"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:../../../../etc/passwd"}]}))
    assert imports.find("ollama", [root]) == []

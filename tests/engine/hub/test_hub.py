"""The hub against a local fake: search, files by quantization, fit from a Range-read header, gated
repos, and where the token goes."""

from __future__ import annotations

import keyring
import pytest
from keyring.backends.fail import Keyring as FailKeyring

from fireside.engine.errors import GatedRepo, HubError, ModelNotFound, UnsafePath
from fireside.engine.hub import auth
from fireside.engine.hub.hub import Hub
from fireside.engine.models.hardware import Hardware
from fireside.engine.models.inspection import inspect_file
from tests.helpers.hubfixtures import Q4, Q8, REPO, SPLIT, hub_settings, make_hub, run_fakehub

fakehub = pytest.fixture(run_fakehub)
settings = pytest.fixture(hub_settings)

GiB = 1 << 30


def cpu_machine(ram: int) -> Hardware:
    return Hardware(llama_cpp_version="test", backends=["CPU"], gpu_offload=False, devices=[],
                    cpu_cores=4, cpu_threads=8, ram_total_bytes=ram, ram_available_bytes=ram)


def test_search_finds_gguf_repos_by_text(settings, fakehub):
    hits = make_hub(settings).search("smollm")
    assert [h.id for h in hits] == [REPO]
    assert hits[0].downloads == 500 and hits[0].likes == 10
    seen = [s for s in fakehub.seen if s.path == "/api/models"]
    assert seen, "huggingface_hub did not call the endpoint from settings"


def test_repo_groups_files_by_quant_with_sizes_and_hashes(settings, fakehub):
    details = make_hub(settings).repo(REPO)
    assert sorted(details.quants()) == ["Q4_1", "Q8_0"]
    q4 = details.quants()["Q4_1"][0]
    data = fakehub.repos[REPO].files[Q4]
    import hashlib

    assert q4.size == len(data) and q4.sha256s == [hashlib.sha256(data).hexdigest()]
    assert details.license == "apache-2.0" and not details.gated


def test_split_set_is_one_hub_file(settings):
    details = make_hub(settings).repo(SPLIT)
    [big] = details.files
    assert big.quant == "Q8_0" and big.parts == ["Big-Q8_0-00001-of-00002.gguf", "Big-Q8_0-00002-of-00002.gguf"]


def test_pick_by_quant_file_or_default(settings):
    hub = make_hub(settings)
    details = hub.repo(REPO)
    assert hub.pick(details, "q8_0").name == Q8
    assert hub.pick(details, Q4).name == Q4
    assert hub.pick(details).name == Q4  # a Q4 is the default
    with pytest.raises(ModelNotFound, match="Q4_1, Q8_0"):
        hub.pick(details, "IQ2_XS")
    with pytest.raises(UnsafePath):
        hub.pick(details, "../../etc/x.gguf")


def test_fit_verdict_comes_from_the_header_read_by_range(settings, fakehub, tmp_path):
    hub = make_hub(settings)
    hub.probe = 64 * 1024  # the Q4 file's header (a 300 KB chat template) needs a second read
    details = hub.repo(REPO)
    q4 = hub.pick(details, "Q4_1")
    check = hub.fit(REPO, q4, hardware=cpu_machine(16 * GiB))
    local = tmp_path / "q4.gguf"
    local.write_bytes(fakehub.repos[REPO].files[Q4])
    on_disk = inspect_file(local)
    assert check.info.layer_bytes == on_disk.layer_bytes and check.info.file_size == on_disk.file_size
    assert check.plan.verdict == "cpu_only"
    assert hub.fit(REPO, q4, hardware=cpu_machine(64 * 1024 * 1024)).plan.verdict == "will_not_fit"
    ranges = fakehub.ranges(Q4)
    assert len(ranges) >= 2 and ranges[0] == "bytes=0-65535" and ranges[1].startswith("bytes=65536-")
    assert all(r and r.startswith("bytes=") for r in ranges), "every read was a Range request"
    assert not (settings.models_dir / "bartowski").exists(), "nothing was downloaded"


def test_fit_of_a_split_set_counts_every_part(settings):
    hub = make_hub(settings)
    [big] = hub.repo(SPLIT).files
    info = hub.header_info(SPLIT, big)
    assert info.block_count == 4 and all(b > 0 for b in info.layer_bytes)
    assert len(info.split_files) == 2


def test_gated_repo_says_how_to_get_access(settings, fakehub):
    fakehub.repos[REPO].gated, fakehub.repos[REPO].token = True, "hf_secret"
    hub = make_hub(settings)
    with pytest.raises(GatedRepo, match="accept its terms.*fireside login"):
        hub.pull(REPO, "Q8_0")
    assert not list(settings.models_dir.rglob("*.gguf"))
    model = make_hub(settings, token="hf_secret").pull(REPO, "Q8_0")
    assert model.path.is_file()


def test_token_goes_to_the_hub_only_never_to_the_cdn(settings, fakehub):
    make_hub(settings, token="hf_secret").pull(REPO, "Q8_0")
    hub_auth = [s.headers.get("authorization") for s in fakehub.seen if s.server == "hub"]
    cdn_auth = [s.headers.get("authorization") for s in fakehub.seen if s.server == "cdn"]
    assert cdn_auth and all(a is None for a in cdn_auth)
    assert hub_auth and all(a == "Bearer hf_secret" for a in hub_auth)


def test_token_lives_in_the_keyring(settings, fakehub, memory_keyring):
    auth.set_token("hf_from_keyring\n")
    assert memory_keyring.store[(auth.SERVICE, auth.USERNAME)] == "hf_from_keyring"
    assert Hub(settings).token == "hf_from_keyring"
    auth.delete_token()
    assert Hub(settings).token is None


def test_no_keyring_backend_still_works_and_says_so(settings):
    keyring.set_keyring(FailKeyring())
    assert auth.get_token() is None
    with pytest.raises(HubError, match="no usable OS keyring.*HF_TOKEN"):
        auth.set_token("hf_x")


def test_unsafe_repo_id_is_refused_before_any_request(settings, fakehub):
    hub = make_hub(settings)
    for bad in ["../../etc", "a/b/../../c", "C:/x"]:
        with pytest.raises(UnsafePath):
            hub.repo(bad)
    assert not [s for s in fakehub.seen if s.server == "hub"]


def test_hostile_file_names_in_a_repo_are_not_offered(settings, fakehub):
    fakehub.repos[REPO].listed_only = ["../../../evil-Q4_0.gguf", "sub/../../x-Q4_0.gguf"]
    details = make_hub(settings).repo(REPO)
    assert sorted(f.name for f in details.files) == [Q4, Q8]



def test_incomplete_split_set_is_not_offered(settings, fakehub):
    del fakehub.repos[SPLIT].files["Big-Q8_0-00002-of-00002.gguf"]
    assert make_hub(settings).repo(SPLIT).files == []


def test_cli_search_and_files_with_fit(settings, fakehub, monkeypatch, capsys):
    import json

    from fireside.engine.cli import main
    from fireside.engine.models import hardware

    monkeypatch.setenv("HF_ENDPOINT", fakehub.url)
    monkeypatch.setattr(hardware, "detect", lambda refresh=False: cpu_machine(16 * GiB))
    assert main(["search", "smol"]) == 0
    assert REPO in capsys.readouterr().out
    assert main(["files", REPO, "--fit", "--json"]) == 0
    files = {f["quant"]: f for f in json.loads(capsys.readouterr().out)["files"]}
    assert files["Q4_1"]["fit"] == "cpu_only" and files["Q4_1"]["size"] == len(fakehub.repos[REPO].files[Q4])
    assert not (settings.models_dir / "bartowski").exists()

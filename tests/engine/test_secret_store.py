"""One keyring policy for every secret Fireside keeps (the hub token, the API key, remote keys, MCP
tokens): no keyring means nothing kept, said once in the log and in words when a write is refused; a
keyring that fails is an error the caller sees, never swallowed. Sizes and counts read the same in
the CLI and the app (decimal units, as Ollama and LM Studio print them)."""

from __future__ import annotations

import logging

import keyring
import pytest
from keyring.backends import fail
from keyring.errors import KeyringLocked

from fireside.engine import apikey, secrets
from fireside.engine.errors import HubError, McpServerError, RemoteError, ServerError
from fireside.engine.fmt import human_bytes, human_count
from fireside.engine.hub import auth
from fireside.engine.mcp.config import TokenStore
from fireside.engine.remote.registry import KeyringStore
from tests.helpers.keyrings import MemoryKeyring


class LockedKeyring(MemoryKeyring):
    """A keyring that exists but will not open (a locked GNOME Keyring, a denied prompt)."""

    def get_password(self, service, username, *_password):
        raise KeyringLocked("the collection is locked")

    set_password = delete_password = get_password


@pytest.fixture
def locked():
    keyring.set_keyring(LockedKeyring())  # the memory_keyring fixture restores the previous one


@pytest.fixture
def no_keyring(monkeypatch):
    keyring.set_keyring(fail.Keyring())
    monkeypatch.setattr(secrets, "_reported", set())


def test_a_locked_keyring_is_an_error_the_caller_sees(locked):
    with pytest.raises(RemoteError, match="could not be read from the OS keyring: the collection is locked"):
        KeyringStore().get("lab")
    with pytest.raises(McpServerError, match="cannot be kept: no usable OS keyring"):
        TokenStore().set("web", "s3cret")
    with pytest.raises(ServerError, match="could not be removed"):
        apikey.delete_api_key()


def test_a_locked_keyring_leaves_public_downloads_and_the_server_working_and_says_why(locked, caplog):
    with caplog.at_level(logging.WARNING):
        assert auth.get_token() is None and apikey.load_api_key() is None
    assert "Hugging Face token could not be read" in caplog.text and "going on without a token" in caplog.text
    assert "starting without the saved key" in caplog.text


def test_no_keyring_keeps_nothing_reports_it_once_and_refuses_writes_in_words(no_keyring, caplog):
    with caplog.at_level(logging.WARNING, logger="fireside.engine.secrets"):
        assert KeyringStore().get("lab") is None
        assert KeyringStore().get("other") is None
        KeyringStore().delete("lab")
    assert caplog.text.count("no OS keyring is available") == 1  # once per kind of secret, not per call
    assert not secrets.keyring_available()
    with pytest.raises(HubError, match="no usable OS keyring.*HF_TOKEN"):
        auth.set_token("hf_x")
    with pytest.raises(ServerError, match="no usable OS keyring.*--api-key"):
        apikey.save_api_key("k" * 32)


def test_every_kind_of_secret_round_trips_under_its_own_service(memory_keyring):
    auth.set_token("hf_a")
    apikey.save_api_key("key-b")
    KeyringStore().set("lab", "sk-c")
    TokenStore().set("web", "tok-d")
    assert memory_keyring.store == {("fireside", "huggingface-token"): "hf_a", ("Fireside", "api-server-key"): "key-b",
                                    ("Fireside remote engines", "lab"): "sk-c", ("Fireside MCP servers", "web"): "tok-d"}
    assert (auth.get_token(), apikey.load_api_key(), KeyringStore().get("lab")) == ("hf_a", "key-b", "sk-c")
    auth.delete_token()
    apikey.delete_api_key()
    KeyringStore().delete("lab")
    TokenStore().delete("web")
    TokenStore().delete("never-stored")  # nothing there: nothing to do
    assert memory_keyring.store == {}


@pytest.mark.parametrize(("n", "shown"), [(512, "512 B"), (23_040, "23 KB"), (98_432_000, "98.4 MB"),
                                          (1_900_000_000, "1.9 GB"), (4.2e12, "4.2 TB"), (7e15, "7000.0 TB")])
def test_sizes_are_decimal_as_ollama_and_lm_studio_show_them(n, shown):
    assert human_bytes(n) == shown


@pytest.mark.parametrize(("n", "shown"), [(950, "950"), (12_400, "12K"), (134_515_008, "135M"),
                                          (1_711_376_384, "1.7B"), (8.03e9, "8.0B")])
def test_counts_read_like_model_names(n, shown):
    assert human_count(n) == shown

"""Where no OS keyring exists (a bare server, this CI machine), the API key code degrades with words."""

from __future__ import annotations

import keyring
import pytest
from keyring.backends import fail

from fireside.engine.apikey import delete_api_key, load_api_key, save_api_key
from fireside.engine.errors import ServerError


@pytest.fixture
def no_keyring():
    keyring.set_keyring(fail.Keyring())  # the memory_keyring fixture restores the previous one


def test_without_a_keyring_there_is_no_saved_key_and_saving_says_why(no_keyring):
    assert load_api_key() is None
    delete_api_key()  # nothing to delete, nothing raised
    with pytest.raises(ServerError, match="no usable OS keyring.*--api-key"):
        save_api_key("k" * 32)

"""An in-memory keyring backend: this machine has no keyring daemon, and tests must not touch a real one."""

from __future__ import annotations

from keyring.backend import KeyringBackend


class MemoryKeyring(KeyringBackend):
    priority = 1

    def __init__(self):
        super().__init__()
        self.store: dict[tuple[str, str], str] = {}

    def get_password(self, service, username):
        return self.store.get((service, username))

    def set_password(self, service, username, password):
        self.store[(service, username)] = password

    def delete_password(self, service, username):
        from keyring.errors import PasswordDeleteError

        if self.store.pop((service, username), None) is None:
            raise PasswordDeleteError(username)


class DictKeys:
    """A key store (what ``RemoteRegistry(keys=...)`` takes) in a dict: for module-scoped servers that
    outlive each test's in-memory keyring."""

    def __init__(self):
        self.keys: dict[str, str] = {}

    def get(self, name):
        return self.keys.get(name)

    def set(self, name, key):
        self.keys[name] = key

    def delete(self, name):
        self.keys.pop(name, None)


class FileKeyring(KeyringBackend):
    """A keyring in a JSON file named by ``FIRESIDE_TEST_KEYRING``, for ``fireside`` subprocesses (chosen with
    ``PYTHON_KEYRING_BACKEND=tests.helpers.keyrings.FileKeyring``): each test device keeps its own, and the
    CLI and a running server of one device see the same entries, as with an OS keyring."""

    priority = 1

    def _path(self):
        import os
        from pathlib import Path

        return Path(os.environ["FIRESIDE_TEST_KEYRING"])

    def _load(self) -> dict:
        import json

        try:
            return json.loads(self._path().read_text())
        except FileNotFoundError:
            return {}

    def _save(self, data: dict) -> None:
        import json
        import os

        tmp = self._path().with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, self._path())

    def get_password(self, service, username):
        return self._load().get(f"{service}\0{username}")

    def set_password(self, service, username, password):
        self._save({**self._load(), f"{service}\0{username}": password})

    def delete_password(self, service, username):
        from keyring.errors import PasswordDeleteError

        data = self._load()
        if data.pop(f"{service}\0{username}", None) is None:
            raise PasswordDeleteError(username)
        self._save(data)

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

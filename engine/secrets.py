"""Secrets in the OS keyring: one small store with one error policy, for every kind of key Fireside keeps.

Each kind of secret (remote engines' API keys, MCP servers' bearer tokens) lives under its own keyring
service name, one entry per name. A keyring that is missing or locked is never swallowed on read or
write: it becomes the caller's ``FiresideError`` subclass with a sentence saying what could not be kept
and what to do instead. Deleting what is not there (or cannot be reached) is a no-op.

Threading: any thread; ``keyring`` backends serialize themselves.
"""

from __future__ import annotations

from .errors import FiresideError


class SecretStore:
    """Secrets of one kind (``what``, e.g. "key of remote engine") under the keyring service ``service``."""

    def __init__(self, service: str, error: type[FiresideError], what: str, instead: str):
        self.service, self.error, self.what, self.instead = service, error, what, instead

    def get(self, name: str) -> str | None:
        import keyring
        from keyring.errors import KeyringError

        try:
            return keyring.get_password(self.service, name)
        except KeyringError as exc:
            raise self.error(f"the {self.what} {name!r} could not be read from the OS keyring: {exc}") from None

    def set(self, name: str, secret: str) -> None:
        import keyring
        from keyring.errors import KeyringError

        try:
            keyring.set_password(self.service, name, secret)
        except KeyringError as exc:
            raise self.error(f"no OS keyring is available to keep the {self.what} {name!r} ({exc}); "
                             f"{self.instead}, or install a keyring backend") from None

    def delete(self, name: str) -> None:
        import keyring
        from keyring.errors import KeyringError, PasswordDeleteError

        try:
            keyring.delete_password(self.service, name)
        except (PasswordDeleteError, KeyringError):
            pass  # nothing stored, or no keyring at all: nothing to remove

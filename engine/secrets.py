"""Secrets in the OS keyring: one small store with one error policy, for every kind of key Fireside keeps.

Each kind of secret lives under its own keyring service name: the Hugging Face token
(``hub/auth.py``), the API server's key (``server/security.py``), remote engines' API keys
(``remote/registry.py``) and MCP servers' bearer tokens (``mcp/config.py``), one entry per name. The
policy, the same for all of them:

- **No keyring on this machine** (keyring's "fail" or "null" backend, or ``NoKeyringError``): a read
  finds nothing (nothing can have been kept) and a delete has nothing to remove; the first time, the
  log says so, once per process and kind. A write raises the caller's ``FiresideError`` subclass with
  a sentence saying what could not be kept and what to do instead.
- **A keyring that fails** (locked, access denied, a broken backend): every operation raises the
  caller's error with the keyring's own message. Nothing is swallowed; a caller that can do without
  the secret (a public download without a token) catches its error and logs it.

``keyring_available()`` tells the app whether to warn before the user types a secret.

Threading: any thread, but never the GUI thread: backends talk to a daemon over D-Bus (or their
platform's equivalent) and can block on an unlock prompt.
"""

from __future__ import annotations

import logging
import threading

from .errors import FiresideError

log = logging.getLogger(__name__)

INSTALL = "install and unlock an OS keyring (GNOME Keyring or KWallet on Linux)"
_reported: set[str] = set()
_reported_lock = threading.Lock()


def keyring_available() -> bool:
    """False when keyring fell back to its "fail" or "null" backend (no OS keyring on this machine).
    Asking picks the backend, which may start a daemon: call it off the GUI thread."""
    import keyring
    from keyring.backends import fail, null

    backend = keyring.get_keyring()
    if isinstance(backend, (fail.Keyring, null.Keyring)):
        return False
    chained = getattr(backend, "backends", None)  # the chainer is empty when no backend is usable
    return chained is None or bool(chained)


def _report_once(what: str, detail: object) -> None:
    with _reported_lock:
        first = what not in _reported
        _reported.add(what)
    if first:
        log.warning("no OS keyring is available, so no %s is kept on this machine (%s)", what, detail)


class SecretStore:
    """Secrets of one kind (``what``, e.g. "key of remote engine") under the keyring service ``service``.

    ``error`` is the ``FiresideError`` subclass raised, ``instead`` what the user can do without a
    keyring (said when a write fails). ``entry`` names the only entry of a kind that has one (the hub
    token), so its methods need no name.
    """

    def __init__(self, service: str, error: type[FiresideError], what: str, instead: str, entry: str | None = None):
        self.service, self.error, self.what, self.instead, self.entry = service, error, what, instead, entry

    def _label(self, name: str) -> str:
        return f"the {self.what}" if self.entry else f"the {self.what} {name!r}"

    def get(self, name: str | None = None) -> str | None:
        """The secret, or None when none is stored or no keyring exists."""
        import keyring
        from keyring.errors import KeyringError, NoKeyringError

        name = name or self.entry
        if not keyring_available():
            _report_once(self.what, "keyring found no backend")
            return None
        try:
            return keyring.get_password(self.service, name) or None
        except NoKeyringError as exc:
            _report_once(self.what, exc)
            return None
        except KeyringError as exc:
            raise self.error(f"{self._label(name)} could not be read from the OS keyring: {exc}") from None

    def set(self, name_or_secret: str, secret: str | None = None) -> None:
        """Keep ``secret`` under ``name`` (``set(name, secret)``; ``set(secret)`` for a one-entry kind)."""
        import keyring
        from keyring.errors import KeyringError

        name, secret = (self.entry, name_or_secret) if secret is None else (name_or_secret, secret)
        if not keyring_available():
            raise self.error(f"{self._label(name)} cannot be kept: no usable OS keyring on this machine; "
                             f"{self.instead}, or {INSTALL}")
        try:
            keyring.set_password(self.service, name, secret)
        except KeyringError as exc:
            raise self.error(f"{self._label(name)} cannot be kept: no usable OS keyring ({exc}); "
                             f"{self.instead}, or {INSTALL}") from None

    def delete(self, name: str | None = None) -> None:
        """Forget the secret; a no-op when none is stored or no keyring exists."""
        import keyring
        from keyring.errors import KeyringError, NoKeyringError, PasswordDeleteError

        name = name or self.entry
        if not keyring_available():
            _report_once(self.what, "keyring found no backend")
            return
        try:
            keyring.delete_password(self.service, name)
        except PasswordDeleteError:
            pass  # nothing was stored
        except NoKeyringError as exc:
            _report_once(self.what, exc)
        except KeyringError as exc:
            raise self.error(f"{self._label(name)} could not be removed from the OS keyring: {exc}") from None

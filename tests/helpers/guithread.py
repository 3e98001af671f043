"""A tripwire for blocking calls on the GUI thread: the OS keyring, package metadata and walks of the
file system, the three kinds of call that froze Fireside's window for a visible moment (a keyring
daemon waking up, ``site-packages`` being read, a models folder being walked), plus ``os.fsync`` (an
atomic write waits for the disk twice) and writes to an SQLite database other than the ones expected
there (``expected_db``: the chats database, whose small WAL writes are on the GUI thread by design,
so a crash never loses text the user saw).

``GuiThreadIO.armed(monkeypatch)`` wraps each such function so that a call made on the main thread is
recorded with where it came from, and then goes on (raising instead would be swallowed by whichever
slot or callback made the call, and the test would learn nothing). ``calls`` lists what was recorded;
a test asserts it is empty after driving the app.
"""

from __future__ import annotations

import importlib.metadata
import os
import sqlite3
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import keyring

SQL_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE", "COMMIT", "END", "CREATE", "DROP", "ALTER", "VACUUM")


@dataclass
class GuiThreadIO:
    calls: list[str] = field(default_factory=list)
    expected_db: tuple[str, ...] = ()

    @classmethod
    def armed(cls, monkeypatch, expected_db: tuple[str, ...] = ()) -> GuiThreadIO:
        """Wrap every watched call; ``expected_db`` names the database files (``chats.sqlite3``) that may
        be written on the GUI thread. Only connections opened after this are watched."""
        guard = cls(expected_db=tuple(expected_db))
        for owner, name in ((keyring, "get_password"), (keyring, "set_password"), (keyring, "delete_password"),
                            (keyring, "get_keyring"), (importlib.metadata, "distribution"),
                            (importlib.metadata, "distributions"), (importlib.metadata, "entry_points"),
                            (importlib.metadata, "version"), (os, "walk"), (os, "scandir"), (os, "listdir"),
                            (Path, "rglob"), (Path, "glob"), (Path, "iterdir"), (os, "fsync")):
            monkeypatch.setattr(owner, name, guard._wrap(f"{getattr(owner, '__name__', owner)}.{name}",
                                                         getattr(owner, name)))
        from_name = importlib.metadata.Distribution.from_name  # what metadata.version() reaches, bound early
        monkeypatch.setattr(importlib.metadata.Distribution, "from_name",
                            classmethod(guard._wrap("Distribution.from_name", from_name.__func__)))
        monkeypatch.setattr(sqlite3, "connect", guard._watch_connect(sqlite3.connect))
        return guard

    def _watch_connect(self, connect):
        def watched(database, *args, **kwargs):
            db = connect(database, *args, **kwargs)
            name = Path(str(database).split("?")[0].removeprefix("file:")).name
            if name not in self.expected_db:
                record = self._wrap(f"an SQLite write to {name}", lambda: None)
                db.set_trace_callback(lambda sql: record() if sql.lstrip().upper().startswith(SQL_WRITES) else None)
            return db

        return watched

    def _wrap(self, label: str, fn):
        def guarded(*args, **kwargs):
            if threading.current_thread() is threading.main_thread():
                stack = traceback.extract_stack()[:-1]
                ours = [f for f in stack if "/fireside/" in f.filename or "/engine/" in f.filename
                        or "/app/" in f.filename or "/tests/" in f.filename]
                where = "".join(traceback.format_list((ours or stack)[-4:] + stack[-2:]))
                self.calls.append(f"{label} on the GUI thread, from:\n{where}")
            return fn(*args, **kwargs)

        return guarded

    def report(self) -> str:
        return "\n".join(self.calls[:5]) + (f"\n... and {len(self.calls) - 5} more" if len(self.calls) > 5 else "")

"""Where the app tells the user something went wrong: ``show_error`` is the one function that does it.

Every page, task callback and slot hands its exceptions here. A ``FiresideError`` carries a message
meant for a person and is shown as is; anything else is a bug, so it is logged with its traceback and
shown with its type. The message lands in the main window's notice bar (non-modal: a stream or a load
elsewhere keeps going); before a window exists it goes to the log only. ``history`` keeps the last
fifty messages, so the tests (which empty it around each test) can read what the user was told.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from fireside.engine.errors import FiresideError

log = logging.getLogger(__name__)

_sinks: list[Callable[[str], None]] = []
history: list[str] = []


def describe(exc: BaseException) -> str:
    """A sentence for a person: the error's own message, or its type for an unexpected one."""
    if isinstance(exc, FiresideError):
        return str(exc) or type(exc).__name__
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def show_error(exc: BaseException | str, context: str = "") -> str:
    """Show ``exc`` to the user (in the notice bar) and log it. Returns the text shown."""
    text = exc if isinstance(exc, str) else describe(exc)
    if context:
        text = f"{context}: {text}"
    if isinstance(exc, BaseException) and not isinstance(exc, FiresideError):
        log.error("unexpected error: %s", text, exc_info=exc)
    else:
        log.info("shown to the user: %s", text)
    history.append(text)
    del history[:-50]
    for sink in list(_sinks):
        sink(text)
    return text


def add_sink(sink: Callable[[str], None]) -> None:
    """Route shown errors to ``sink`` (the main window's notice bar)."""
    _sinks.append(sink)


def remove_sink(sink: Callable[[str], None]) -> None:
    if sink in _sinks:
        _sinks.remove(sink)

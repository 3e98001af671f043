"""Where a timed-out test was stuck, said again at the very end of the run.

pytest-timeout fails a test that runs past its limit and dumps every other thread's stack into the
report; with two workers and a busy runtime that dump runs to hundreds of lines, and a CI log that keeps
only its tail loses the one stack that matters: the test's own, the thread that waited. This plugin
keeps the last frames of that wait (the timeout is raised there) and prints them, one short block per
timed-out test, just before pytest's short summary. Reports carry it to the controller under xdist.
"""

from __future__ import annotations

import pytest

KEY = "stalled_at"
FRAMES = 14
PLUMBING = ("/pluggy/", "/_pytest/", "pytest_timeout")  # frames of pytest's own, never where a test waits


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    excinfo = call.excinfo
    if report.failed and excinfo is not None and "from pytest-timeout" in str(excinfo.value):
        entries = [e for e in excinfo.traceback if not any(part in str(e.path) for part in PLUMBING)][-FRAMES:]
        frames = [f"{e.path}:{e.lineno + 1} in {e.name}" for e in entries]
        report.user_properties.append((KEY, f"{report.nodeid} ({report.when}):\n  " + "\n  ".join(frames)))


class Stalls:
    """The controller's (or the lone process's) list of timed-out tests and where each waited."""

    def __init__(self) -> None:
        self.found: list[str] = []

    def pytest_runtest_logreport(self, report):
        self.found += [text for name, text in report.user_properties if name == KEY]

    def pytest_terminal_summary(self, terminalreporter):
        if self.found:
            terminalreporter.section("where each timed-out test waited (its own thread, innermost last)", sep="+")
            for text in self.found:
                terminalreporter.line(text)


def pytest_configure(config):
    config.pluginmanager.register(Stalls(), "fireside-stalls")

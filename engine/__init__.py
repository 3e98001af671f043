"""Fireside's engine: model inspection, fit planning, runtime, library, hub and the local API.

Nothing under ``fireside.engine`` imports Qt; the desktop app in ``fireside.app`` is one client of it,
the ``fireside`` command line and the HTTP server are others.
"""

__version__ = "0.1.0"

"""Light, dark or system theme: the Fusion style with a matching palette, plus Fireside's style sheet.

"System" follows the platform's colour scheme where Qt can read it (and light where it cannot). The
style sheet lives in ``resources/styles/fireside.qss``; palette roles do the colouring, the sheet only
shapes things (cards, the side bar, the notice bar), so one sheet serves both schemes.
"""

from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QIcon, QPalette
from PySide6.QtWidgets import QApplication, QStyleFactory

log = logging.getLogger(__name__)
STYLE_SHEET = Path(__file__).resolve().parent.parent / "resources" / "styles" / "fireside.qss"
APP_ICON = STYLE_SHEET.parent.parent / "icons" / "fireside.svg"
CHECK_DARK = STYLE_SHEET.parent.parent / "icons" / "check-dark.svg"
# Fusion draws an unticked box in the base colour with an outline darker than the window: on the dark
# palette it all but vanished. In the dark scheme the boxes are drawn here instead, with a light edge.
DARK_INDICATORS = """
QCheckBox::indicator, QGroupBox::indicator { width: 13px; height: 13px; border: 1px solid #9a9ca2;
    border-radius: 3px; background: #17181b; }
QCheckBox::indicator:checked, QGroupBox::indicator:checked { background: #e0703a; border-color: #e0703a;
    image: url(@check); }
QCheckBox::indicator:hover, QGroupBox::indicator:hover { border-color: #f0a070; }
QCheckBox::indicator:disabled, QGroupBox::indicator:disabled { border-color: #4a4c52; }
QCheckBox::indicator:checked:disabled, QGroupBox::indicator:checked:disabled { background: #5a3a2a;
    border-color: #5a3a2a; }
"""


def app_icon() -> QIcon:
    """Fireside's flame (``resources/icons/fireside.svg``) for the window, the tray and the task bar.
    Where Qt cannot draw the SVG (a build without its SVG icon engine) the installed theme icon, which
    installers/icons.py renders from the same file, stands in."""
    icon = QIcon(str(APP_ICON))
    if icon.pixmap(32, 32).isNull():
        log.warning("cannot draw the app icon %s; using the installed theme icon", APP_ICON)
        icon = QIcon.fromTheme("fireside", icon)
    return icon


def dark_palette() -> QPalette:
    p = QPalette()
    colors = {
        QPalette.Window: "#202226", QPalette.WindowText: "#e8e8ea", QPalette.Base: "#17181b",
        QPalette.AlternateBase: "#26282d", QPalette.Text: "#e8e8ea", QPalette.Button: "#2c2e34",
        QPalette.ButtonText: "#e8e8ea", QPalette.Highlight: "#e0703a", QPalette.HighlightedText: "#ffffff",
        QPalette.ToolTipBase: "#2c2e34", QPalette.ToolTipText: "#e8e8ea", QPalette.Link: "#f0a070",
        QPalette.PlaceholderText: "#8a8c92", QPalette.Mid: "#3a3c42", QPalette.Light: "#3a3c42",
    }
    for role, color in colors.items():
        p.setColor(role, QColor(color))
    for role in (QPalette.Text, QPalette.ButtonText, QPalette.WindowText):
        p.setColor(QPalette.Disabled, role, QColor("#6c6e74"))
    return p


def light_palette() -> QPalette:
    p = QApplication.style().standardPalette()
    p.setColor(QPalette.Highlight, QColor("#d9622b"))
    p.setColor(QPalette.Link, QColor("#b5501f"))
    p.setColor(QPalette.Window, QColor("#f6f6f7"))
    return p


def resolve(name: str | None) -> str:
    if name in ("light", "dark"):
        return name
    scheme = QGuiApplication.styleHints().colorScheme()
    return "dark" if scheme == Qt.ColorScheme.Dark else "light"


def apply_theme(name: str | None) -> str:
    """Apply ``light``, ``dark`` or ``system``; returns the scheme in effect."""
    app = QApplication.instance()
    if app is None:
        return "light"
    app.setStyle(QStyleFactory.create("Fusion"))
    scheme = resolve(name)
    app.setPalette(dark_palette() if scheme == "dark" else light_palette())
    app.setProperty("firesideScheme", scheme)
    try:
        sheet = STYLE_SHEET.read_text(encoding="utf-8")
    except OSError:
        log.info("no style sheet at %s; using the plain palette", STYLE_SHEET)
        sheet = ""
    if scheme == "dark":
        sheet += DARK_INDICATORS.replace("@check", CHECK_DARK.as_posix())
    app.setStyleSheet(sheet.replace("@card", "#2a2c31" if scheme == "dark" else "#ffffff")
                      .replace("@user", "#33302c" if scheme == "dark" else "#fbeee6")
                      .replace("@line", "#3a3c42" if scheme == "dark" else "#dcdce0"))
    return scheme

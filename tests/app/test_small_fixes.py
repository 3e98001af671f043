"""The small things a user noticed (issue 18.8): the tray and the window carry Fireside's flame, not Qt's
generic computer; the greyed Context box under Auto shows the plan's context; My Models does not count
imports hard-linked from another app as space used."""

from __future__ import annotations

import os

import pytest
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QImage, QPainter
from PySide6.QtSvg import QSvgRenderer
from PySide6.QtWidgets import QPushButton, QStyle

from fireside.engine.library import Library
from fireside.engine.library import library as library_module
from fireside.engine.models import hardware
from fireside.engine.models.fitplan import LoadOptions
from fireside.engine.models.inspection import inspect_file
from fireside.engine.models.planner import plan_fit
from fireside.engine.settings import Settings
from tests.helpers.driving import open_load_dialog
from tests.helpers.gguf_builder import build_gguf

ICON_SVG = "resources/icons/fireside.svg"
SIDE = 64


def _svg_image(path: str) -> QImage:
    """The flame drawn straight from the SVG, without QIcon: what the icon must look like."""
    image = QImage(SIDE, SIDE, QImage.Format_ARGB32_Premultiplied)
    image.fill(Qt.transparent)
    painter = QPainter(image)
    QSvgRenderer(path).render(painter, QRectF(0, 0, SIDE, SIDE))
    painter.end()
    return image


def _same(icon, expected: QImage) -> bool:
    got = icon.pixmap(SIDE, SIDE).toImage().convertToFormat(QImage.Format_ARGB32_Premultiplied)
    points = [(x, y) for x in range(4, SIDE, 12) for y in range(4, SIDE, 12)]
    return all(abs(got.pixelColor(x, y).red() - expected.pixelColor(x, y).red()) <= 8 for x, y in points)


@pytest.mark.qt_log_ignore("systemTrayWindowChanged", "propagateSizeHints")  # offscreen: no tray to follow
def test_window_and_tray_show_the_fireside_flame(qtbot, make_app, shared_runtime):
    from fireside.app.tray import Tray

    root = os.path.join(os.path.dirname(__file__), "..", "..")
    expected = _svg_image(os.path.join(root, ICON_SVG))
    app = make_app(shared_runtime)
    assert _same(app.window.windowIcon(), expected), "the window does not carry the flame"
    assert not _same(app.window.style().standardIcon(QStyle.SP_ComputerIcon), expected)  # the test can tell
    tray = Tray(app)
    try:
        assert _same(tray.icon.icon(), expected), "the tray icon is not the flame"
    finally:
        tray.hide()


def test_greyed_context_shows_the_auto_plan(qtbot, make_app, shared_runtime):
    app = make_app(shared_runtime)
    dialog = open_load_dialog(qtbot, app)
    plan = plan_fit(inspect_file(shared_runtime.resolver("starter")), hardware.detect(), LoadOptions())
    assert dialog.auto.isChecked() and not dialog.context.isEnabled()
    assert dialog.context.value() == plan.context, f"the greyed box says {dialog.context.value()}, the plan {plan.context}"
    assert f"context {plan.context:,}" in dialog.estimate.text()
    dialog.reject()


def test_hard_linked_imports_take_no_new_space(qtbot, make_app, shared_runtime, tmp_path, monkeypatch):
    monkeypatch.setattr(library_module, "embedder_path", lambda settings: None)  # no built-in embedder's wheel
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path / "home")})
    settings.ensure_dirs()
    own = build_gguf(settings.models_dir / "local" / "mine" / "Mine-Q8_0.gguf", payload_bytes=3 << 20, seed=3)
    other = build_gguf(tmp_path / "other-app" / "models" / "Theirs-Q4_0.gguf", payload_bytes=5 << 20, seed=4)
    lib = Library(settings)
    lib.record(own, "local", None)
    imported = lib.add_file(other, app="lmstudio")
    assert os.stat(imported.path).st_ino == os.stat(other).st_ino  # a hard link, as on most disks
    app = make_app(shared_runtime, settings)
    models = app.window.pages["My Models"]
    qtbot.waitUntil(lambda: "models ·" in models.summary.text(), timeout=20_000)
    from fireside.engine.fmt import human_bytes

    summary = models.summary.text()
    # The built-in model is the app's own file, unless another test's library hard-linked it elsewhere
    # (an import of it kept in a pytest folder): then it too is a link to a copy outside this library.
    starter = shared_runtime.resolver("starter").stat()
    starter_own, starter_linked = (starter.st_size, 0) if starter.st_nlink == 1 else (0, starter.st_size)
    assert summary.startswith("3 models")
    assert f"{human_bytes(own.stat().st_size + starter_own)} on disk" in summary, summary
    assert f"{human_bytes(other.stat().st_size + starter_linked)} more are links" in summary, summary


def test_a_library_of_one_says_one_model(qtbot, make_app, shared_runtime, tmp_path, monkeypatch):
    monkeypatch.setattr(library_module, "embedder_path", lambda settings: None)  # no built-in embedder's wheel
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path / "home")})
    settings.ensure_dirs()
    app = make_app(shared_runtime, settings)  # nothing but the built-in starter
    models = app.window.pages["My Models"]
    qtbot.waitUntil(lambda: " · " in models.summary.text(), timeout=20_000)
    assert models.summary.text().startswith("1 model · "), models.summary.text()


def test_import_from_other_apps_names_them_and_says_when_there_is_nothing(qtbot, make_app, shared_runtime, tmp_path,
                                                                         monkeypatch):
    """Issue 45: the menu listed raw ids (lmstudio, hf-cache) and an import that found nothing said nothing."""
    monkeypatch.setenv("HOME", str(tmp_path / "empty-home"))  # no LM Studio here
    app = make_app(shared_runtime)
    models = app.window.pages["My Models"]
    menu = next(w.menu() for w in models.findChildren(QPushButton) if w.text() == "Import from other apps")
    names = [a.text() for a in menu.actions()]
    assert "LM Studio" in names and "Hugging Face cache" in names and "lmstudio" not in names, names
    next(a for a in menu.actions() if a.text() == "LM Studio").trigger()
    qtbot.waitUntil(lambda: "Nothing to import from LM Studio" in models.summary.text(), timeout=20_000)
    assert str(tmp_path / "empty-home" / ".lmstudio" / "models") in models.summary.text()


def test_the_gpu_layers_slider_is_greyed_on_a_cpu_only_build_even_by_hand(qtbot, make_app, shared_runtime):
    """Issue 45: the GPU layers slider could be moved on a build with no GPU at all."""
    app = make_app(shared_runtime)
    dialog = open_load_dialog(qtbot, app)
    if any(d.kind != "cpu" for d in dialog.hw.devices):
        pytest.skip("this llama.cpp build sees a GPU")
    dialog.auto.setChecked(False)  # by hand: the other settings open up, the slider stays shut
    assert dialog.context.isEnabled() and not dialog.layers.isEnabled()
    assert "No GPU" in dialog.layers_label.text()
    dialog.reject()


def test_an_unticked_box_stands_out_in_the_dark_theme(qtbot):
    """Issue 45: in the dark theme an unticked checkbox was a dark square on a dark window."""
    from PySide6.QtWidgets import QCheckBox, QStyleOptionButton

    from fireside.app.theme import apply_theme

    apply_theme("dark")
    try:
        box = QCheckBox("Require the key on this computer too")
        qtbot.addWidget(box)
        box.resize(box.sizeHint())
        box.show()
        qtbot.waitExposed(box)
        option = QStyleOptionButton()
        box.initStyleOption(option)
        square = box.style().subElementRect(QStyle.SE_CheckBoxIndicator, option, box)
        image = box.grab().toImage()
        window = box.palette().window().color().lightness()
        edge = max(image.pixelColor(x, y).lightness() for x in range(square.left(), square.right() + 1)
                   for y in range(square.top(), square.bottom() + 1))
        assert edge - window > 80, f"the box's lightest pixel {edge} against the window's {window}"
    finally:
        apply_theme("light")

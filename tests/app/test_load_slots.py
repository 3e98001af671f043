"""The load dialog's parallel slots (issue 12.3): Auto shows the planner's choice; a manual choice is
planned, shown in the estimate and kept with the model's settings."""

from __future__ import annotations

import pytest

from fireside.app.bridge.loader import describe_options
from fireside.engine.devices import DeviceBook, Identity
from fireside.engine.devices.pairing import pair
from fireside.engine.errors import HardwareError
from fireside.engine.facade import Engine
from fireside.engine.models import hardware
from fireside.engine.models.fitplan import LoadOptions
from fireside.engine.models.inspection import inspect_file
from fireside.engine.models.planner import plan_fit
from fireside.engine.remote import RemoteEngine
from fireside.engine.server.shared import Share, Sharing
from fireside.engine.settings import Settings
from tests.helpers.driving import open_load_dialog
from tests.helpers.keyrings import DictKeys


def test_load_dialog_chooses_parallel_slots(qtbot, make_app, shared_runtime):
    app = make_app(shared_runtime)
    dialog = open_load_dialog(qtbot, app)
    auto = plan_fit(inspect_file(shared_runtime.resolver("starter")), hardware.detect(), LoadOptions())
    assert not dialog.parallel.isEnabled() and dialog.parallel.value() == auto.parallel
    assert f"{auto.parallel} slots" in dialog.estimate.text()

    dialog.auto.setChecked(False)
    dialog.parallel.setValue(2)
    assert "2 slots" in dialog.estimate.text()
    assert dialog.options().parallel == 2
    dialog.save_on_accept = True
    dialog.accept()
    saved = LoadOptions.from_dict(app.ctx.prefs.get("load_options")["starter"])
    assert saved.parallel == 2 and "2 slots" in describe_options(saved)


def test_load_dialog_chooses_prompt_lookup_and_a_draft_model(qtbot, make_app, shared_runtime, tmp_path):
    """Drafting (issue 30) is chosen beside Auto: the library's other models are offered as draft models
    (not the model itself), the estimate counts the draft's memory and says where drafts come from,
    and the choice is kept with the model's settings."""
    from fireside.engine.library.library import Library
    from tests.helpers.models import smollm2_file
    from tests.helpers.vision_model import write_text_model

    tiny = write_text_model(tmp_path / "tiny-draft.gguf", smollm2_file())
    app = make_app(shared_runtime)
    draft_id = Library(app.ctx.engine.settings).add_file(tiny).id  # listed by the app's library,
    assert Library(shared_runtime.settings).add_file(tiny).id == draft_id  # read by the shared runtime's
    dialog = open_load_dialog(qtbot, app)
    qtbot.waitUntil(lambda: dialog.draft.findText(draft_id) >= 0, timeout=10_000)
    assert dialog.draft.findText("starter") < 0
    assert "Drafts: only from a request's prediction" in dialog.estimate.text()
    ram_before = dialog.estimate.text()

    dialog.draft.setCurrentText(draft_id)
    qtbot.waitUntil(lambda: "the draft model tiny-draft.gguf (on the CPU)" in dialog.estimate.text(), timeout=10_000)
    dialog.lookup.setChecked(True)
    assert "prompt lookup and the draft model" in dialog.estimate.text()
    assert dialog.estimate.text().split(" · RAM ")[1] != ram_before.split(" · RAM ")[1]  # its weights and KV counted
    assert dialog.options() == LoadOptions(drafts=True, draft=draft_id)  # memory settings stay Auto
    dialog.save_on_accept = True
    dialog.accept()
    saved = LoadOptions.from_dict(app.ctx.prefs.get("load_options")["starter"])
    assert saved.draft == draft_id and saved.drafts
    assert f"draft model {draft_id}" in describe_options(saved) and "prompt lookup" in describe_options(saved)


def test_load_dialog_shows_where_the_layers_go(qtbot, make_app, shared_runtime):
    """The split, device by device, before loading: on this GPU-less machine every layer in RAM."""
    dialog = open_load_dialog(qtbot, make_app(shared_runtime))
    plan = plan_fit(inspect_file(shared_runtime.resolver("starter")), hardware.detect(), LoadOptions())
    assert " · RAM " in dialog.estimate.text() and f"({plan.ram.layers} layers)" in dialog.estimate.text()


def test_load_dialog_places_layers_on_a_paired_device_s_lent_memory(qtbot, make_app, shared_runtime, tmp_path):
    """Issue 49: a paired device that lends memory is offered as a checkbox; checked, the estimate shows the
    layers it takes beside this machine's RAM, and the choice is kept with the model's settings."""
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path / "desk")})
    settings.ensure_dirs()
    engine = Engine(settings, shared_runtime, remotes=RemoteEngine(settings, devices=DeviceBook(settings, keys=DictKeys())))
    try:
        desk = Sharing(settings, Share("127.0.0.1", 0, "desk", announce=False, lend_gib=2), engine)
    except HardwareError as exc:
        pytest.skip(f"llama.cpp's RPC backend is not available: {exc}")
    desk.start()
    try:
        app = make_app(shared_runtime)
        mine = app.ctx.engine.settings
        code, _ = desk.desk.open_code()
        pair(DeviceBook(mine), Identity.load_or_create(mine, "studio"), "studio", "desk", "127.0.0.1",
             int(desk.url.rsplit(":", 1)[1]), code)
        dialog = open_load_dialog(qtbot, app)
        qtbot.waitUntil(lambda: "desk" in dialog.machine_boxes, timeout=10_000)
        dialog.auto.setChecked(False)
        dialog.layers.setValue(16)
        assert "desk (lent)" not in dialog.estimate.text()
        dialog.machine_boxes["desk"].setChecked(True)
        qtbot.waitUntil(lambda: "desk (lent)" in dialog.estimate.text(), timeout=15_000)
        assert "Split across your machines" in dialog.estimate.text()
        assert "(15 layers)" in dialog.estimate.text().split("desk (lent)")[1].split("·")[0]  # 16 with the output
        assert dialog.options().with_devices == ("desk",)
        dialog.save_on_accept = True
        dialog.accept()
        saved = LoadOptions.from_dict(app.ctx.prefs.get("load_options")["starter"])
        assert saved.with_devices == ("desk",) and "layers also on desk" in describe_options(saved)
    finally:
        desk.stop()
        engine.remotes.close()


def test_load_dialog_counts_and_says_the_attention_this_machine_measured(qtbot, make_app, tmp_path, smollm2_path):
    """A machine that measured plain f16 attention faster deep in a chat gives sampled replies a long-chat
    lane (a second, f16 KV cache): the dialog's estimate counts that cache and says which replies take which
    attention, as the load will (before, it showed the memory of a load without it)."""
    from PySide6.QtWidgets import QDialog

    from fireside.engine.runtime import attention
    from fireside.engine.runtime.runtime import Runtime

    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path / "home")})
    settings.ensure_dirs()
    runtime = Runtime(settings, idle_ttl_s=0, calibrate=False)
    try:
        app = make_app(runtime, settings)
        dialog = open_load_dialog(qtbot, app)
        unmeasured = dialog.estimate.text()
        assert "Attention:" not in unmeasured
        dialog.reject()
        dialog.deleteLater()  # the next open finds a new dialog, which reads the model and the figures again
        qtbot.waitUntil(lambda: app.window.chat.model_bar.findChild(QDialog) is None, timeout=5_000)
        key = attention.model_key(hardware.detect(), inspect_file(smollm2_path), hardware.detect().cpu_cores)
        figures = {"q8_0+fa": {"0": 90.0, "1024": 30.0}, "f16": {"0": 88.0, "1024": 60.0}}
        runtime.attention.remember(key, figures, "starter")
        dialog = open_load_dialog(qtbot, app)
        measured = dialog.estimate.text()
        assert "Attention: q8_0+fa for greedy and seeded replies, f16 for sampled ones from" in measured
        ram = [_bytes(text.split(" · RAM ")[1].split(" (")[0]) for text in (unmeasured, measured)]
        assert ram[1] > ram[0] * 1.2, (unmeasured, measured)  # the lane's f16 cache beside the q8_0 one
        loaded = runtime.load("starter")  # and the load takes what the dialog said
        assert any(n.startswith("attention: q8_0+fa for greedy and seeded replies, f16 for sampled ones")
                   for n in loaded.notes), loaded.notes
    finally:
        runtime.close()


def _bytes(text: str) -> float:
    """"412.3 MB" -> bytes (the dialog's human_bytes)."""
    number, unit = text.split()
    return float(number) * 1000 ** ["B", "KB", "MB", "GB", "TB"].index(unit)

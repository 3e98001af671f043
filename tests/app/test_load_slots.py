"""The load dialog's parallel slots (issue 12.3): Auto shows the planner's choice; a manual choice is
planned, shown in the estimate and kept with the model's settings."""

from __future__ import annotations

from fireside.app.bridge.loader import describe_options
from fireside.engine.models import hardware
from fireside.engine.models.inspection import inspect_file
from fireside.engine.models.planner import LoadOptions, plan_fit
from tests.helpers.driving import open_load_dialog


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

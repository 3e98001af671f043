"""The load dialog: GPU layers, context length, KV-cache type, flash attention and parallel slots for one
model, speculative decoding's drafts (prompt lookup, a draft model from the library), and the paired devices whose
lent memory may hold layers (``rpc/``: asked off the GUI thread when checked), with the fit planner's live
estimate of VRAM and RAM and its verdict.

"Auto" (the default) lets the planner choose the memory settings; drafting is chosen either way. The model's header is read and the hardware
detected once, off the GUI thread; each change then re-plans (a pure computation) and shows the result.
What the user picks is remembered per model in the preferences: by the dialog itself when it only edits
the settings (My Models), or by the model bar once a load with them succeeded (its Load... button), so
settings that fail to load are never kept.
"""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import Qt, Slot
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QSlider,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from fireside.engine.fmt import human_bytes

from ..bridge import (
    DEFAULT_PARALLEL,
    VERDICT_WORDS,
    LoadOptions,
    drafting_text,
    plan_fit,
    planned_attention,
    with_draft,
)
from ..bridge.loader import options_dict
from ..context import AppContext
from ..feedback import show_error

VERDICTS = VERDICT_WORDS  # one wording for the app and the CLI, kept in the planner
FLASH = {"Auto": None, "On": True, "Off": False}
NO_DRAFT = "None"
MAX_SLOTS = 16  # each slot holds a whole context: past this the KV memory, not the speed, is what grows


class LoadDialog(QDialog):
    """Load settings for ``model_id``; ``options()`` is what to load with (``None`` for Auto)."""

    def __init__(self, ctx: AppContext, model_id: str, parent: QWidget | None = None, *, save_on_accept: bool = True):
        super().__init__(parent)
        self.ctx, self.model_id, self.save_on_accept = ctx, model_id, save_on_accept
        self.setWindowTitle(f"Load {model_id}")
        self.setMinimumWidth(460)
        self.info = self.hw = self.draft_info = None
        self.attention: dict | None = None  # what this machine measured of the model's attention, once read
        self.lent: list = []  # what the checked paired devices lend (planner devices), as last asked
        self.lent_problems: list[str] = []  # and why any of them could not be asked
        self._build()
        saved = LoadOptions.from_dict((ctx.prefs.get("load_options") or {}).get(model_id))
        self._saved_draft = saved.draft
        self._apply(saved, auto=replace(saved, drafts=False, draft=None) == LoadOptions())
        self._saved_with = tuple(saved.with_devices or ())
        ctx.bridge.inspect(model_id, self._on_inspected)
        ctx.bridge.list_models(self._on_listed)
        ctx.bridge.lending_devices(self._on_lending_listed)

    def _build(self) -> None:
        self.auto = QCheckBox("Auto (let Fireside choose)")
        self.layers = QSlider(Qt.Horizontal, minimum=0, maximum=1)
        self.layers_label = QLabel()
        self.context = QSpinBox(minimum=256, maximum=1 << 20, singleStep=1024, suffix=" tokens")
        self.kv = QComboBox()
        self.kv.addItems(["auto", "f16", "q8_0", "q4_0"])  # auto: q8_0 on the CPU, exact replies (exactness.kv_for)
        self.flash = QComboBox()
        self.flash.addItems(list(FLASH))
        self.parallel = QSpinBox(minimum=1, maximum=MAX_SLOTS, toolTip=(
            "Requests decoded together (chats, API clients), each with a KV cache of the full context"))
        self.lookup = QCheckBox("Prompt lookup", toolTip=(
            "Guess the next tokens from the conversation itself: faster where a reply repeats text it was given, "
            "a little slower elsewhere"))
        self.draft = QComboBox(toolTip="A smaller model with the same vocabulary guesses the next tokens; the "
                                       "model checks each guess, so replies stay the same")
        self.draft.addItem(NO_DRAFT)
        self.machines = QWidget()  # a checkbox per paired device: place layers in the memory it lends
        self.machines_row = QHBoxLayout(self.machines)
        self.machines_row.setContentsMargins(0, 0, 0, 0)
        self.machines_note = QLabel("No paired devices (Server → Your devices)", objectName="hint")
        self.machines_row.addWidget(self.machines_note)
        self.machine_boxes: dict[str, QCheckBox] = {}
        self.estimate = QLabel("Reading the model…", wordWrap=True, objectName="estimate")
        form = QFormLayout()
        form.addRow(self.auto)
        form.addRow("GPU layers", self.layers)
        form.addRow("", self.layers_label)
        form.addRow("Context length", self.context)
        form.addRow("KV cache", self.kv)
        form.addRow("Flash attention", self.flash)
        form.addRow("Parallel slots", self.parallel)
        form.addRow("Drafts", self.lookup)
        form.addRow("Draft model", self.draft)
        form.addRow("Other machines", self.machines)
        buttons = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        buttons.button(QDialogButtonBox.Ok).setText("Load")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        lay.addWidget(self.estimate)
        lay.addWidget(buttons)
        for signal in (self.auto.toggled, self.layers.valueChanged, self.context.valueChanged,
                       self.kv.currentIndexChanged, self.flash.currentIndexChanged, self.parallel.valueChanged,
                       self.lookup.toggled):
            signal.connect(self._on_changed)
        self.draft.currentTextChanged.connect(self._on_draft_current_text_changed)

    def _apply(self, o: LoadOptions, auto: bool) -> None:
        self.auto.setChecked(auto)
        self.layers.setValue(o.n_gpu_layers or 0)
        self.context.setValue(o.context or 4096)
        self.kv.setCurrentText(o.kv_type)
        self.flash.setCurrentText(next(k for k, v in FLASH.items() if v == o.flash_attn))
        self.parallel.setValue(o.parallel or DEFAULT_PARALLEL)
        self.lookup.setChecked(o.drafts)

    def checked_machines(self) -> tuple[str, ...]:
        return tuple(name for name, box in self.machine_boxes.items() if box.isChecked())

    def options(self) -> LoadOptions | None:
        draft = self.draft.currentText()
        drafting = {"drafts": self.lookup.isChecked(), "draft": None if draft == NO_DRAFT else draft,
                    "with_devices": self.checked_machines() or None}
        if self.auto.isChecked():
            return LoadOptions(**drafting) if any(drafting.values()) else None
        return LoadOptions(n_gpu_layers=self.layers.value(), context=self.context.value(),
                           kv_type=self.kv.currentText(), flash_attn=FLASH[self.flash.currentText()],
                           parallel=self.parallel.value(), **drafting)

    def _on_listed(self, result, error) -> None:
        """The library's models, offered as draft models (this one left out: it would guess only what it
        then computes again)."""
        if error:
            return  # no list, no choice: drafting from a model waits for the next time
        models, _disk = result
        self.draft.blockSignals(True)
        self.draft.addItems([m.id for m in models if m.id != self.model_id])
        self.draft.blockSignals(False)
        if self._saved_draft:
            if self.draft.findText(self._saved_draft) < 0:
                self.draft.addItem(self._saved_draft)  # a path, or a model gone since: shown as saved
            self.draft.setCurrentText(self._saved_draft)

    def _on_lending_listed(self, result, error) -> None:
        """A checkbox per paired device this one uses; those saved for this model checked (and asked)."""
        if error or not result:
            return
        self.machines_note.hide()
        for name in result:
            box = QCheckBox(name, toolTip=f"Place the layers this machine cannot hold in the memory {name} lends "
                                          f"(it runs `fireside serve --share --lend GIB`)")
            box.setChecked(name in self._saved_with)
            box.toggled.connect(self._on_machines_toggled)
            self.machine_boxes[name] = box
            self.machines_row.addWidget(box)
        self.machines_row.addStretch(1)
        if self.checked_machines():
            self._on_machines_toggled()

    @Slot()
    def _on_machines_toggled(self, *_args) -> None:
        names = self.checked_machines()
        if not names:
            self.lent = []
            self._on_changed()
            return
        self.estimate.setText(f"Asking {', '.join(names)} what memory it lends…")
        self.ctx.bridge.lent(list(names), lambda result, error: self._on_lent(names, result, error))

    def _on_lent(self, names: tuple[str, ...], result, error) -> None:
        if names != self.checked_machines():
            return  # the choice changed meanwhile: its own answer follows
        if error:
            self.lent, self.lent_problems = [], [str(error)]
        else:
            self.lent, self.lent_problems = result
        self._on_changed()

    @Slot(str)
    def _on_draft_current_text_changed(self, text: str) -> None:
        self.draft_info = None
        if text != NO_DRAFT:
            self.ctx.bridge.inspect(text, lambda result, error: self._on_draft_inspected(text, result, error))
        self._on_changed()

    def _on_draft_inspected(self, draft: str, result, error) -> None:
        if draft != self.draft.currentText():
            return  # another was chosen meanwhile
        if error:
            self.estimate.setText(f"Cannot read the draft model {draft}: {error}")
            return
        self.draft_info = result[0]
        self._on_changed()

    def _on_inspected(self, result, error) -> None:
        if error:
            self.estimate.setText(f"Cannot read this model: {error}")
            return
        self.info, self.hw, self.attention = result
        self.layers.setMaximum(self.info.block_count + 1)
        self.context.setMaximum(max(256, self.info.context_length))
        self._on_changed()

    @Slot()
    def _on_changed(self, *_args) -> None:
        manual = not self.auto.isChecked()
        for w in (self.layers, self.context, self.kv, self.flash, self.parallel):
            w.setEnabled(manual)
        where = " (on the GPUs and the checked machines)" if self.lent else ""
        self.layers_label.setText(f"{self.layers.value()} of {self.layers.maximum()}{where}")
        if self._cpu_only():
            self.layers.setEnabled(False)  # nothing to offload to: a live slider would promise a choice
            self.layers_label.setText("No GPU in this llama.cpp build: all on the CPU")
        if self.info is None:
            return
        hw = replace(self.hw, devices=[*self.hw.devices, *self.lent]) if self.lent else self.hw
        try:
            options = self.options() or LoadOptions()
            plan = plan_fit(self.info, hw, options)
            if self.draft_info is not None:
                plan = with_draft(plan, self.draft_info)
            plan = planned_attention(plan, self.info, options, self.attention)  # as the load will take it
        except Exception as exc:
            self.estimate.setText(show_error(exc, "planning the load"))
            return
        verdict, offloaded = VERDICTS.get(plan.verdict, plan.verdict), f"{plan.n_gpu_layers} GPU layers"
        if any(g.name.startswith("rpc:") and g.layers for g in plan.gpus) and plan.fits:
            verdict, offloaded = "Split across your machines", f"{plan.n_gpu_layers} layers on other machines"
        self.estimate.setText(
            f"<b>{verdict}</b> · {offloaded} · "
            f"context {plan.context:,} · {plan.parallel} slot{'s' * (plan.parallel != 1)}<br>{_split_text(plan)}"
            f" · largest context that fits: {plan.max_context:,}<br>Drafts: {drafting_text(plan)}"
            + "".join(f"<br>{_attention_text(note)}" for note in plan.notes if note.startswith("attention:"))
            + "".join(f"<br>{problem}" for problem in self.lent_problems if self.checked_machines()))
        if self.auto.isChecked():
            self._show_plan(plan)

    def _cpu_only(self) -> bool:
        """This llama.cpp build sees no GPU (as read with the model): there are no layers to offload."""
        return self.hw is not None and not self.lent and not any(d.kind != "cpu" for d in self.hw.devices)

    def _show_plan(self, plan) -> None:
        """Auto: the greyed boxes show what the planner chose, not the last manual values."""
        flash = next(k for k, v in FLASH.items() if v == plan.flash_attn)
        for w, set_value in ((self.layers, lambda: self.layers.setValue(plan.n_gpu_layers)),
                             (self.context, lambda: self.context.setValue(plan.context)),
                             (self.kv, lambda: self.kv.setCurrentText(plan.kv_type)),
                             (self.flash, lambda: self.flash.setCurrentText(flash)),
                             (self.parallel, lambda: self.parallel.setValue(plan.parallel))):
            w.blockSignals(True)
            set_value()
            w.blockSignals(False)
        if not self._cpu_only():
            self.layers_label.setText(f"{plan.n_gpu_layers} of {self.layers.maximum()} (auto)")

    def accept(self) -> None:
        if self.save_on_accept:
            self.ctx.prefs.put("load_options", self.model_id, options_dict(self.options()))
        super().accept()


def _split_text(plan) -> str:
    """Where the layers and bytes go, device by device: "Vulkan0 120 MB (15 layers) · RAM 300 MB (15 layers)";
    a paired device's lent memory by its name ("desk (lent) 300 MB (16 layers)")."""
    gpus = " · ".join(f"{_device_words(g.name)} {human_bytes(g.total_bytes)} ({g.layers} layers)"
                      for g in plan.gpus if g.layers)
    experts = " and every layer's experts" if plan.experts_on_cpu else ""
    return f"{gpus or 'VRAM ' + human_bytes(0)} · RAM {human_bytes(plan.ram.total_bytes)} ({plan.ram.layers} layers{experts})"


def _attention_text(note: str) -> str:
    """A plan's attention note for the dialog: "Attention: q8_0+fa for greedy and seeded replies, f16+fa
    for sampled ones from 512 tokens of history" (the measured figures are ``fireside info``'s)."""
    words = note.removeprefix("attention: ").split(" (decode tok/s")[0].removesuffix(", measured on this machine")
    return f"Attention: {words}"


def _device_words(name: str) -> str:
    return f"{name.removeprefix('rpc:')} (lent)" if name.startswith("rpc:") else name

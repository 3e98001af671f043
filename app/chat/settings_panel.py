"""The per-chat panel: system prompt, sampling parameters, tools and knowledge, saved with the conversation.

Values are plain dicts in the store (``Sampling`` field names; for tools, the servers that are on, the step
limit and the knowledge collections ticked), so a chat keeps its settings across restarts and a new chat
starts from the defaults (no tools, no collections: a chat gets them only when the user ticks them). The
ticked collections live in the chat's ``tools`` dict as ``"collections": [ids]``, as OpenAI's API puts a
chat's vector stores under its ``file_search`` tool: what a chat may consult besides the model, in one place,
with no schema change.
"""

from __future__ import annotations

from PySide6.QtCore import Signal, Slot
from PySide6.QtWidgets import (
    QCheckBox,
    QDoubleSpinBox,
    QFormLayout,
    QLabel,
    QPlainTextEdit,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

DEFAULT_SAMPLING = {"temperature": 0.7, "top_p": 0.95, "top_k": 40, "repeat_penalty": 1.1, "max_tokens": 1024}


class ChatSettingsPanel(QWidget):
    """System prompt and sampling for the chat on show.

    Signals:
        changed(): the user edited a value (the chat page saves it).
    """

    changed = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("chatSettings")
        self.system_prompt = QPlainTextEdit(placeholderText="You are a helpful assistant.")
        self.system_prompt.setMaximumHeight(140)
        self.temperature = QDoubleSpinBox(minimum=0.0, maximum=2.0, singleStep=0.05, decimals=2)
        self.top_p = QDoubleSpinBox(minimum=0.0, maximum=1.0, singleStep=0.05, decimals=2)
        self.top_k = QSpinBox(minimum=0, maximum=1000)
        self.repeat_penalty = QDoubleSpinBox(minimum=0.5, maximum=2.0, singleStep=0.05, decimals=2)
        self.max_tokens = QSpinBox(minimum=1, maximum=131072, singleStep=64)
        self.fixed_seed = QCheckBox("Fixed seed")
        self.seed = QSpinBox(minimum=0, maximum=2**31 - 1)
        form = QFormLayout()
        for label, w in (("Temperature", self.temperature), ("Top P", self.top_p), ("Top K", self.top_k),
                         ("Repeat penalty", self.repeat_penalty), ("Max tokens", self.max_tokens)):
            form.addRow(label, w)
        form.addRow(self.fixed_seed, self.seed)
        lay = QVBoxLayout(self)
        lay.addWidget(QLabel("<b>System prompt</b>"))
        lay.addWidget(self.system_prompt)
        lay.addWidget(QLabel("<b>Sampling</b>"))
        lay.addLayout(form)
        self._tools_section(lay)
        self._knowledge_section(lay)
        lay.addStretch(1)
        self.setFixedWidth(230)
        self.system_prompt.textChanged.connect(self._on_value_changed)
        for w in (self.temperature, self.top_p, self.top_k, self.repeat_penalty, self.max_tokens, self.seed):
            w.valueChanged.connect(self._on_value_changed)
        self.fixed_seed.toggled.connect(self._on_value_changed)
        self._loading = False
        self.set_values("", DEFAULT_SAMPLING)

    def set_values(self, system_prompt: str, sampling: dict) -> None:
        self._loading = True
        values = {**DEFAULT_SAMPLING, **sampling}
        self.system_prompt.setPlainText(system_prompt)
        self.temperature.setValue(values["temperature"])
        self.top_p.setValue(values["top_p"])
        self.top_k.setValue(values["top_k"])
        self.repeat_penalty.setValue(values["repeat_penalty"])
        self.max_tokens.setValue(values.get("max_tokens") or 1024)
        self.fixed_seed.setChecked(values.get("seed") is not None)
        self.seed.setValue(values.get("seed") or 0)
        self.seed.setEnabled(self.fixed_seed.isChecked())
        self._loading = False

    def _tools_section(self, lay: QVBoxLayout) -> None:
        """A checkbox per MCP server (filled in by ``set_servers``) and the step limit."""
        lay.addWidget(QLabel("<b>Tools</b> (MCP servers)"))
        self.no_servers = QLabel("No MCP servers yet: add one with <code>fireside mcp add</code>.", wordWrap=True,
                                 objectName="stats")
        self.server_boxes: dict[str, QCheckBox] = {}
        self.servers_column = QVBoxLayout()
        self.servers_column.addWidget(self.no_servers)
        lay.addLayout(self.servers_column)
        self.max_steps = QSpinBox(minimum=1, maximum=50, value=8, toolTip="Rounds of tool calls before the model "
                                  "must answer with what it has")
        steps = QFormLayout()
        steps.addRow("Tool steps", self.max_steps)
        lay.addLayout(steps)
        self.max_steps.valueChanged.connect(self._on_value_changed)
        self._tools_on: list[str] = []

    def set_servers(self, names: list[str]) -> None:
        """The MCP servers a chat can use (read off the GUI thread by the page): one checkbox each."""
        for box in self.server_boxes.values():
            box.setParent(None)
            box.deleteLater()
        self.server_boxes = {}
        for name in names:
            box = QCheckBox(name, toolTip=f"Offer the tools of MCP server {name!r} in this chat")
            box.setChecked(name in self._tools_on)
            box.toggled.connect(self._on_server_toggled)
            self.servers_column.addWidget(box)
            self.server_boxes[name] = box
        self.no_servers.setVisible(not names)

    def _knowledge_section(self, lay: QVBoxLayout) -> None:
        """A checkbox per knowledge collection (filled in by ``set_collections``)."""
        lay.addWidget(QLabel("<b>Knowledge</b> (collections)"))
        self.no_collections = QLabel("No collections yet: make one on the Knowledge page.", wordWrap=True,
                                     objectName="stats")
        self.collection_boxes: dict[str, QCheckBox] = {}
        self.collections_column = QVBoxLayout()
        self.collections_column.addWidget(self.no_collections)
        lay.addLayout(self.collections_column)
        self._collections_on: list[str] = []

    def set_collections(self, collections: list[tuple[str, str]]) -> None:
        """The knowledge collections (``(id, name)``, read off the GUI thread by the page): one checkbox each."""
        for box in self.collection_boxes.values():
            box.setParent(None)
            box.deleteLater()
        self.collection_boxes = {}
        for collection_id, name in collections:
            box = QCheckBox(name or collection_id, toolTip=f"Answer from the passages of {name!r} that match "
                            "each question (they are listed as sources under the reply)")
            box.setObjectName(f"collection:{collection_id}")
            box.setChecked(collection_id in self._collections_on)
            box.toggled.connect(self._on_collection_toggled)
            self.collections_column.addWidget(box)
            self.collection_boxes[collection_id] = box
        self.no_collections.setVisible(not collections)

    @Slot(bool)
    def _on_collection_toggled(self, _on: bool) -> None:
        if not self._loading:
            self._collections_on = self.tools()["collections"]
            self.changed.emit()

    def set_tools(self, tools: dict) -> None:
        self._loading = True
        self._tools_on = list(tools.get("servers") or [])
        self._collections_on = list(tools.get("collections") or [])
        for name, box in self.server_boxes.items():
            box.setChecked(name in self._tools_on)
        for collection_id, box in self.collection_boxes.items():
            box.setChecked(collection_id in self._collections_on)
        self.max_steps.setValue(int(tools.get("max_steps") or 8))
        self._loading = False

    def tools(self) -> dict:
        """``{"servers": [names on], "max_steps": n, "collections": [ids ticked]}``; a server on in this chat
        but no longer configured stays on (its tools come back if it does); a collection not listed yet
        (the list is still being read) stays ticked."""
        known = [n for n, box in self.server_boxes.items() if box.isChecked()]
        kept = [n for n in self._tools_on if n not in self.server_boxes]
        ticked = [i for i, box in self.collection_boxes.items() if box.isChecked()]
        unlisted = [i for i in self._collections_on if i not in self.collection_boxes]
        return {"servers": kept + known, "max_steps": self.max_steps.value(), "collections": unlisted + ticked}

    @Slot(bool)
    def _on_server_toggled(self, _on: bool) -> None:
        if not self._loading:
            self._tools_on = self.tools()["servers"]
            self.changed.emit()

    def values(self) -> tuple[str, dict]:
        sampling = {"temperature": self.temperature.value(), "top_p": self.top_p.value(),
                    "top_k": self.top_k.value(), "repeat_penalty": self.repeat_penalty.value(),
                    "max_tokens": self.max_tokens.value(),
                    "seed": self.seed.value() if self.fixed_seed.isChecked() else None}
        return self.system_prompt.toPlainText(), sampling

    @Slot()
    def _on_value_changed(self, *_args) -> None:
        self.seed.setEnabled(self.fixed_seed.isChecked())
        if not self._loading:
            self.changed.emit()

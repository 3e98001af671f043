"""Every item model the app shows passes pytest-qt's model tester (Qt's QAbstractItemModelTester)."""

from __future__ import annotations

from fireside.app.chat.conversations import ConversationModel
from fireside.app.store import Store


def test_conversation_model(qtmodeltester, tmp_path):
    store = Store(tmp_path / "c.sqlite3")
    for title in ("one", "two", "three"):
        store.create_conversation(title)
    model = ConversationModel(store)
    qtmodeltester.check(model, force_py=True)
    qtmodeltester.check(model)
    assert model.setData(model.index(0), "renamed")
    assert store.conversation(model.items[0].id).title == "renamed"
    model.refresh("two")
    assert model.rowCount() == 1

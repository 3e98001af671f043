"""The knowledge collections the collection and watched-folder tests share: one per test, closed after it."""

from __future__ import annotations

import pytest

from fireside.engine.documents.collections import Collections
from tests.helpers.waiting import wait_until


@pytest.fixture
def collections(tmp_path):
    c = Collections(tmp_path / "knowledge")
    yield c
    c.close()


def settled(c: Collections, collection_id: str) -> None:
    """Wait until every file of the collection is indexed (or failed)."""
    wait_until(lambda: c.get(collection_id).status == "completed", timeout=30)

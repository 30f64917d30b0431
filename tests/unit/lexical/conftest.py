from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from server import lexical
from server.lexical.lucene import LuceneIndex


@pytest.fixture(scope="session")
def jvm() -> None:
    lexical.start(heap_mb=512)


@pytest.fixture
def index(jvm: None, tmp_path: Path) -> Iterator[LuceneIndex]:
    idx = LuceneIndex.open(tmp_path / "tenant")
    yield idx
    idx.close()

"""Fixtures of the sandbox corpus tests (``test_sandbox.py``, ``test_sandbox_outside.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gf2env.records.record import Record
from tests.agents.sandbox_judge import Context, corpus_record, host_context


@pytest.fixture(scope="module")
def record() -> Record:
    """The record every corpus run gets."""
    return corpus_record()


@pytest.fixture
def ctx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, record: Record) -> Iterator[Context]:
    """The host side of one corpus run: secrets, listeners, canaries."""
    with host_context(tmp_path, monkeypatch, record) as c:
        yield c

"""Fixtures shared by the test files."""

from __future__ import annotations

import threading

import pytest

from tests.fault_server import FaultServer


@pytest.fixture
def server():
    """A fresh fault-injecting OpenAI-compatible server on 127.0.0.1 (see ``tests/fault_server.py``)."""
    srv = FaultServer()
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()

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


#: Set (as ``make test`` sets it) to make a missing fetched model a failure rather than a skip.
REQUIRE_MODELS_ENV = "GF2_REQUIRE_MODELS"


def fetched_model(name: str) -> str:
    """The folder of catalog model ``name`` fetched by ``make models`` / ``gf2 models fetch``."""
    import os

    from gf2env.agents.models import is_fetched, model_path

    if not is_fetched(name):
        why = f"{name} is not fetched (run `make models` or `gf2 models fetch {name}`)"
        if os.environ.get(REQUIRE_MODELS_ENV):
            pytest.fail(f"{why}; {REQUIRE_MODELS_ENV} is set, so this is a failure.")
        pytest.skip(why)
    return str(model_path(name))


@pytest.fixture(scope="session")
def smollm2() -> str:
    """SmolLM2-135M-Instruct as a Hugging Face folder: the suite's real pretrained model."""
    return fetched_model("smollm2-135m-instruct")

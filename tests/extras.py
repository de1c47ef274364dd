"""The optional extras' libraries in tests: import one, or skip (fail under ``GF2_REQUIRE_EXTRAS``).

Not a test file. A test of an integration starts with ``ray = require_extra("ray", "ray")``; where the
library is absent the test is skipped with the install command, unless ``GF2_REQUIRE_EXTRAS`` is set
(as ``make test`` sets it), where a missing extra is a failure, not a quiet skip.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

REQUIRE_EXTRAS_ENV = "GF2_REQUIRE_EXTRAS"


def require_extra(module: str, extra: str) -> ModuleType:
    """Import ``module`` (from ``pip install -e '.[extra]'``), or skip/fail the test naming the fix."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        why = f"{module} is not importable ({exc}); pip install -e '.[{extra}]' installs it (make test does)"
        if os.environ.get(REQUIRE_EXTRAS_ENV):
            pytest.fail(f"{why}; {REQUIRE_EXTRAS_ENV} is set, so this is a failure, not a skip.")
        pytest.skip(why)

"""Run untrusted, model-written Python against one task record (see :mod:`agents.sandbox.sandbox`).

``inside`` is the half that runs in the jail (standard library only); the rest stays on the host.
"""

from agents.sandbox.sandbox import (
    BWRAP,
    DEFAULT_LIMITS,
    EMPTY_VIEW,
    ISOLATIONS,
    STOP_REASONS,
    UNSAFE,
    VIEW_KEYS,
    Sandbox,
    SandboxConfigError,
    SandboxLimits,
    SandboxPool,
    SandboxResult,
    SandboxUnavailableError,
    detect_isolation,
    record_view,
)

__all__ = [
    "BWRAP",
    "DEFAULT_LIMITS",
    "EMPTY_VIEW",
    "ISOLATIONS",
    "STOP_REASONS",
    "UNSAFE",
    "VIEW_KEYS",
    "Sandbox",
    "SandboxConfigError",
    "SandboxLimits",
    "SandboxPool",
    "SandboxResult",
    "SandboxUnavailableError",
    "detect_isolation",
    "record_view",
]

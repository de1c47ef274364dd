"""Run untrusted, model-written Python against one task record (see :mod:`gf2env.agents.sandbox.sandbox`).

One module a layer of the README's threat table: ``limits`` (what a run may use, what it did),
``view`` (what of a record the code sees), ``isolation`` (bubblewrap, clearenv, what the machine
supports), ``cgroups`` (a memory cgroup per worker), ``supervise`` (the process tree seen from the
host, the output cap), ``workers`` (warm workers: wall clock, memory watch), ``workspace`` (one
episode's persistent scratch), ``sandbox`` (:class:`Sandbox` composing them), ``check``
(``python -m gf2env.agents.sandbox --check``). ``inside`` is the half that runs in the jail (rlimits
wrapper, fork server, seccomp; standard library only); the rest stays on the host.
"""

from gf2env.agents.sandbox.errors import SandboxConfigError, SandboxUnavailableError
from gf2env.agents.sandbox.isolation import BWRAP, ISOLATIONS, UNSAFE, detect_isolation
from gf2env.agents.sandbox.limits import (
    DEFAULT_LIMITS,
    PAPER_IMPORTS,
    PAPER_LIMITS,
    STOP_REASONS,
    SandboxLimits,
    SandboxResult,
)
from gf2env.agents.sandbox.sandbox import Sandbox, SandboxPool
from gf2env.agents.sandbox.view import EMPTY_VIEW, VIEW_KEYS, paper_record_view, record_view
from gf2env.agents.sandbox.workspace import Workspace, WorkspaceInventory

__all__ = [
    "BWRAP",
    "DEFAULT_LIMITS",
    "EMPTY_VIEW",
    "ISOLATIONS",
    "PAPER_IMPORTS",
    "PAPER_LIMITS",
    "STOP_REASONS",
    "UNSAFE",
    "VIEW_KEYS",
    "Sandbox",
    "SandboxConfigError",
    "SandboxLimits",
    "SandboxPool",
    "SandboxResult",
    "SandboxUnavailableError",
    "Workspace",
    "WorkspaceInventory",
    "detect_isolation",
    "paper_record_view",
    "record_view",
]

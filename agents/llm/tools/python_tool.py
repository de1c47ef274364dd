"""The budgeted ``run_python`` of the tool-calling doors: TRL's tool environment
(:mod:`gf2env.train.tool_env`) and the verifiers toolset (:mod:`gf2env.agents.integrations.verifiers`).

A :class:`PythonTool` runs the model's code in :class:`gf2env.agents.sandbox.Sandbox` on one record's
globals (:func:`~gf2env.agents.llm.tools.record_globals.tool_view`: its public view, never the target)
under the limits the sandbox was made with (tool mode's), counts the calls against a budget (default the
paper's :data:`~gf2env.agents.llm.tools.paper.PAPER_TOOL_CALLS`: one run and its revisions), and returns
:func:`~gf2env.agents.llm.tools.protocol.run_report`, or the door's own words once the budget is spent.
With ``keep_files`` the calls on one record share a workspace
(:meth:`gf2env.agents.sandbox.Sandbox.workspace`) whose files persist from call to call;
:meth:`PythonTool.start` (a new record) and :meth:`PythonTool.close` empty it and give its worker back.
"""

from __future__ import annotations

from typing import Any

from gf2env.agents.llm.tools.paper import PAPER_TOOL_CALLS
from gf2env.agents.llm.tools.protocol import run_report
from gf2env.errors import GF2ConfigError


class PythonTool:
    """``run_python(code)`` on one record's globals, ``max_calls`` calls a record (see the module docs).

    Args:
        sandbox: where the code runs (a :class:`gf2env.agents.sandbox.Sandbox`; its limits are the runs').
        spent: what a call past the budget returns, formatted with ``max_calls``.
        max_calls: calls a record may make.
        keep_files: the calls on one record share a workspace (False: every call starts empty).
    """

    def __init__(
        self, sandbox: Any, spent: str, max_calls: int = PAPER_TOOL_CALLS, keep_files: bool = False
    ) -> None:
        if max_calls < 0:
            raise GF2ConfigError(f"max_calls={max_calls} is negative; pass 0 or more.")
        self.sandbox = sandbox
        self.spent = spent
        self.max_calls = max_calls
        self.keep_files = keep_files
        self.view: dict[str, Any] | None = None
        self.calls = 0
        self.workspace: Any = None

    def start(self, view: dict[str, Any]) -> None:
        """Serve a new record: its globals (``view``), no call made, the last record's workspace gone."""
        self.close()
        self.view, self.calls = view, 0

    def run_python(self, code: str) -> str:
        """Run ``code`` on the record's globals: the run's report, or :attr:`spent` past the budget."""
        if self.view is None:
            raise GF2ConfigError("run_python has no record; call start(view) first.")
        if self.calls >= self.max_calls:
            return self.spent.format(max_calls=self.max_calls)
        self.calls += 1
        if not self.keep_files:
            return run_report(self.sandbox.run(code, self.view))
        if self.workspace is None:
            self.workspace = self.sandbox.workspace()
        return run_report(self.workspace.run(code, self.view))

    def close(self) -> None:
        """Empty the workspace and give its worker back (idempotent)."""
        if self.workspace is not None:
            self.workspace.close()
            self.workspace = None


__all__ = ["PythonTool"]

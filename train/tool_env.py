"""A GF2Recon step as a tool-calling environment, in the shape TRL's ``GRPOTrainer`` takes.

``GRPOTrainer(..., environment_factory=GF2ToolEnvironment)`` makes one instance per rollout, calls
``reset(**row)`` with the dataset row (its return value is appended to the last user message), and
exposes the public methods as tools, their docstrings being the tool descriptions:

- :meth:`GF2ToolEnvironment.run_python` runs code in :class:`gf2env.agents.sandbox.Sandbox` on the step's
  record (the same public view as tool mode: never the answer) and returns what it printed
  (:class:`gf2env.agents.llm.tools.python_tool.PythonTool`, the budgeted tool verifiers serves too); the
  rollout's calls share one workspace (:meth:`gf2env.agents.sandbox.Sandbox.workspace`), so a module written
  at one call is imported at the next (a tool built once and reused), and the next rollout starts
  empty;
- :meth:`GF2ToolEnvironment.submit` hands in the answer; the first submission is final (no
  backtracking), later ones are refused;
- :meth:`GF2ToolEnvironment.get_reward` (called by TRL once per rollout): 1.0 for the exact next
  term, else 0.0.

Rows come from :func:`tool_dataset` (a ``record`` column with the record's JSON); without one,
``reset()`` draws a fresh step itself (depth uniform over ``depths``, record ``i`` of the instance
a pure function of ``(seed, g, i)``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from gf2env.agents.llm.tools.paper import PAPER_TOOL_CALLS
from gf2env.agents.llm.tools.python_tool import PythonTool
from gf2env.agents.llm.tools.record_globals import globals_sentence, tool_view
from gf2env.agents.sandbox import Sandbox
from gf2env.config.settings import DEPTH_LADDER
from gf2env.errors import GF2ConfigError
from gf2env.records.record import Record, generate_record
from gf2env.task.oracle import TaskConfig
from gf2env.text.answers import score_answer, submitted_answer
from gf2env.text.prompt import PAPER_PROMPT_ID, Prompt, check_prompt_id, render_prompt


def tool_call_instructions(answer_offset: int, workspace: bool = True) -> str:
    """What the model is told about the two tools (appended to the prompt by :meth:`reset`)."""
    files = (
        "Files you write in the working directory stay for your later run_python calls on this task "
        "(write a module there to import it later). "
        if workspace
        else ""
    )
    return (
        "Tools: run_python(code) runs Python 3 (numpy and the standard library) on this record and returns "
        f"what it printed; the record is loaded as {globals_sentence()}. "
        f"Payload index j is the prompt's variable {answer_offset} + j. {files}When you know "
        "the next term, call submit(indices) once with its indices in the prompt's numbering; the first "
        "submission is final."
    )


class GF2ToolEnvironment:
    """One step of GF2Recon with a Python tool and an answer tool (see the module docs).

    Args:
        sandbox: where ``run_python`` runs (default: ``Sandbox()``, which refuses to start where
            bubblewrap cannot run).
        workspace: the rollout's ``run_python`` calls share a workspace whose files persist from call
            to call (False: every call starts from an empty scratch).
        prompt_id: the prompt of the step (one of :data:`gf2env.text.prompt.PROMPT_IDS`).
        max_tool_calls: ``run_python`` calls a rollout may make (the paper: 1 + 10 revisions).
        depths, p, d, K, sampling, seed: how ``reset()`` draws a step when the row has no record.
    """

    def __init__(
        self,
        sandbox: Sandbox | None = None,
        workspace: bool = True,
        prompt_id: str = PAPER_PROMPT_ID,
        max_tool_calls: int = PAPER_TOOL_CALLS,
        depths: Sequence[int] = DEPTH_LADDER,
        p: int = 12,
        d: int = 4,
        K: int = 32,
        sampling: str = "adversarial",
        seed: int | None = None,
    ) -> None:
        check_prompt_id(prompt_id)
        if max_tool_calls < 0:
            raise GF2ConfigError(f"max_tool_calls={max_tool_calls} is negative; pass 0 or more.")
        if not depths or min(depths) < 0:
            raise GF2ConfigError(f"depths={tuple(depths)} must be a non-empty list of depths >= 0.")
        self.sandbox = sandbox or Sandbox()
        self.keep_files = workspace
        spent = "No runs left: this rollout has used all {max_calls} of them. Call submit."
        self._python = PythonTool(self.sandbox, spent, max_tool_calls, keep_files=workspace)
        self.prompt_id = prompt_id
        self.depths = tuple(depths)
        self.configs = {g: TaskConfig(p=p, d=d, K=K, n=g + 1, sampling=sampling) for g in self.depths}
        self.seed = int(np.random.SeedSequence().generate_state(1)[0]) if seed is None else seed
        self._rng = np.random.default_rng(self.seed)
        self._drawn = 0
        self.record: Record | None = None
        self.prompt: Prompt | None = None
        self.submission: dict[str, Any] | None = None

    @property
    def max_tool_calls(self) -> int:
        """``run_python`` calls a rollout may make."""
        return self._python.max_calls

    @max_tool_calls.setter
    def max_tool_calls(self, value: int) -> None:
        self._python.max_calls = value

    @property
    def tool_calls(self) -> int:
        """``run_python`` calls this rollout made."""
        return self._python.calls

    @property
    def workspace(self) -> Any:
        """The rollout's workspace (``None`` until its first ``run_python``, and once it is over)."""
        return self._python.workspace

    def reset(self, record: str | dict[str, Any] | None = None, **row: Any) -> str:
        """Start a rollout on ``record`` (a dataset row's JSON), or on a freshly drawn step."""
        if record is None:
            g = int(self._rng.choice(self.depths))
            self.record = generate_record(self.configs[g], g, self._drawn, self.seed)
            self._drawn += 1
        else:
            self.record = Record.from_json(json.loads(record) if isinstance(record, str) else record)
        rec = self.record
        self.prompt = render_prompt(
            self.prompt_id, rec.prefix, rec.address, rec.payload, rec.labels, n=rec.n, p=rec.p, d=rec.d
        )
        self.submission = None
        self._python.start(tool_view(rec, self.prompt.answer_offset))  # the last rollout's workspace goes
        return f"{self.prompt.text}\n\n{tool_call_instructions(self.prompt.answer_offset, self.keep_files)}"

    def _require_reset(self) -> tuple[Record, Prompt]:
        if self.record is None or self.prompt is None:
            raise GF2ConfigError("The environment has no step yet; call reset() first.")
        return self.record, self.prompt

    def run_python(self, code: str) -> str:
        """Run Python 3 code on the task's record and return what it printed.

        The record is preloaded as variables n, p, d, g, K, prefix and samples (and the dict
        record); numpy and the standard library can be imported. There is no network and no
        access to files outside the working directory. Files written there stay for the later calls
        of this task, and a module written there can be imported by them.

        Args:
            code: The Python source to run.

        Returns:
            The exit status, the standard output and the standard error of the run.
        """
        self._require_reset()
        return self._python.run_python(code)

    def submit(self, indices: list[int]) -> str:
        """Submit the next term of the circuit. Only the first submission counts.

        Args:
            indices: The variable indices of the next term's payload variables, in the prompt's numbering.

        Returns:
            A confirmation that the answer was recorded (it does not say whether it is right).
        """
        rec, prompt = self._require_reset()
        if self.submission is not None:
            return f"Already submitted {self.submission['answer']}; the first submission is final."
        answer = submitted_answer(indices)
        score = score_answer(answer, rec.target, rec.p, prompt.answer_offset)
        self.submission = {"answer": list(indices), "score": score.to_dict(), "tool_calls": self.tool_calls}
        return f"Submitted {list(indices)}."

    def get_reward(self) -> float:
        """1.0 if the submitted term is the exact next term, else 0.0 (no submission: 0.0). The
        rollout is over: its workspace is emptied and its worker given back."""
        self._python.close()
        return float(self.submission is not None and self.submission["score"]["correct"])


def tool_dataset(records: Sequence[Record], prompt: str = "") -> list[dict[str, Any]]:
    """Rows for ``datasets.Dataset.from_list``: a chat ``prompt`` (``reset`` appends the step) and the
    record's JSON (read by :meth:`GF2ToolEnvironment.reset`; it holds the target, which the model
    never sees: only the environment reads it)."""
    return [
        {"prompt": [{"role": "user", "content": prompt}], "record": json.dumps(rec.to_json()), "g": rec.g}
        for rec in records
    ]


__all__ = ["GF2ToolEnvironment", "tool_call_instructions", "tool_dataset"]

"""verifiers 0.4 (Prime Intellect's environments library) as a door into GF2Recon: a taskset and its tool.

verifiers 0.4 (``import verifiers.v1 as vf``) finds its plugins by the name of an installed top-level
module (``vf-eval gf2-recon`` imports ``gf2_recon``; its loader does not resolve a dotted id such as
this module's), so the package ``gf2_recon`` re-exports :class:`GF2Taskset` and :class:`GF2Harness`
from here. Needs the ``verifiers`` extra (Python >= 3.11; a virtualenv of its own:
``make .venv-verifiers/.ready``).

- :class:`GF2Taskset` (``--env.taskset.p/d/K/sampling/depths/trials/seed/prompt/tools``): task ``i``
  is record ``trial`` at depth ``g`` (depths outermost, then trials), the very record ``gf2
  generate`` and ``gf2 eval`` draw for the same settings and seed (a pure function of
  ``(seed, g, trial)``), as the prompt row of :func:`gf2env.records.rows.prompt_row`.
- :class:`GF2Task`: its reward ``correct`` is :func:`gf2env.text.answers.score_answer` of the last
  assistant reply (1.0 or 0.0), its metrics the failure classes (one 1.0). verifiers keeps a reply's
  finish reason but not which stop string ended it, so the reply is graded as it came back.
- :class:`GF2PythonToolset` (with ``tools``): one MCP tool server a rollout (verifiers starts it as
  ``python -m gf2env.agents.integrations.verifiers``) with one tool, ``run_python(code)``, which runs the
  code in :class:`gf2env.agents.sandbox.Sandbox` on the record's public view (what gf2env's tool mode shows:
  never the target) under tool mode's limits, and returns :func:`gf2env.agents.llm.tools.protocol.run_report`
  (:class:`gf2env.agents.llm.tools.python_tool.PythonTool`, the budgeted tool TRL's environment uses too).
- :class:`GF2Harness`: verifiers' own ``null`` chat loop (no bash tool; MCP tools when there are
  some), the taskset's default harness.

:func:`load_environment` builds the environment from Python through verifiers' own loader.
"""

from __future__ import annotations

import json
from typing import Any

from gf2env.errors import GF2ConfigError, MissingExtraError

try:
    import verifiers.v1 as vf
    from pydantic import Field, field_validator, model_validator
    from verifiers.v1.harnesses.null import NullHarness
except ImportError as err:  # pragma: no cover - depends on the environment
    raise MissingExtraError(
        "The verifiers integration needs verifiers 0.4 (Python >= 3.11): "
        f"pip install -e '.[verifiers]' ({err})."
    ) from None

from gf2env.agents.llm.tools.paper import PAPER_TOOL_CALLS
from gf2env.agents.llm.tools.protocol import answer_form, tool_protocol
from gf2env.agents.llm.tools.python_tool import PythonTool
from gf2env.agents.llm.tools.record_globals import globals_sentence, tool_view
from gf2env.agents.sandbox import ISOLATIONS, Sandbox
from gf2env.config.settings import DEPTH_LADDER, TaskSettings, check_depths
from gf2env.records.record import Record, generate_record
from gf2env.records.rows import prompt_row
from gf2env.text.answers import FAILURE_CLASSES, Score, score_answer
from gf2env.text.prompt import PAPER_PROMPT_ID, check_prompt_id

TASKSET_ID = "gf2-recon"  # the module gf2_recon


def tool_call_instructions(answer_offset: int, k: int) -> str:
    """What the model is told about ``run_python`` (added to the user message with ``tools``)."""
    return (
        "Tool: run_python(code) runs Python 3 (numpy and the standard library; no network, no files) on "
        "this record and returns what it printed. The record is loaded as the globals "
        f"{globals_sentence('the ')}. Payload index j is the prompt's variable {answer_offset} + j. "
        f"When you know the next term, reply with it as {answer_form(k)}."
    )


class GF2ToolsetConfig(vf.ToolsetConfig):
    """The sandbox of ``run_python`` (``--env.taskset.task.python.*``)."""

    isolation: str = "bwrap"
    """``bwrap``, or ``UNSAFE-rlimits-only`` (no namespaces: only where bubblewrap cannot run)."""
    max_calls: int = Field(PAPER_TOOL_CALLS, ge=0)
    """``run_python`` calls a rollout may make (the paper's budget: 1 run and 10 revisions)."""

    @field_validator("isolation")
    @classmethod
    def _isolation(cls, value: str) -> str:
        if value not in ISOLATIONS:
            raise GF2ConfigError(f"isolation={value!r} is not one of {ISOLATIONS}.")
        return value


class GF2TaskConfig(vf.TaskConfig):
    """A task's knobs: ``tools`` follows the taskset's ``tools``; ``python`` is the tool's sandbox."""

    tools: bool = False
    python: GF2ToolsetConfig = GF2ToolsetConfig()


class GF2Data(vf.TaskData):
    """A prompt row (:func:`gf2env.records.rows.prompt_row`) as verifiers task data; ``record`` is the
    record's JSON, read by the tool server (the model never sees it: it holds the target)."""

    target: list[int]
    p: int
    answer_offset: int
    g: int
    trial: int
    record: str


class GF2PythonToolset(vf.Toolset[GF2ToolsetConfig]):
    """``run_python(code)`` on the rollout's record, in gf2env's sandbox (see the module docs)."""

    TOOL_PREFIX = None  # the tool is advertised as run_python

    def __init__(self, config: GF2ToolsetConfig) -> None:
        super().__init__(config)
        self.sandbox: Sandbox | None = None
        spent = "No runs left: all {max_calls} are used. Reply with the answer."
        self.python = PythonTool(None, spent, config.max_calls)  # its sandbox comes with setup()

    async def setup(self) -> None:
        """Refuse to serve where the sandbox cannot run (no bubblewrap and no explicit opt-out)."""
        self.sandbox = self.python.sandbox = Sandbox(
            tool_protocol("gf2env").limits, isolation=self.config.isolation
        )

    async def setup_task(self, data: GF2Data) -> None:
        """The rollout's record (verifiers hands the task's data over its state channel), as tool mode
        shows it to code: its public view and the answer offset."""
        self.python.start(tool_view(Record.from_json(json.loads(data.record)), data.answer_offset))

    @vf.tool
    def run_python(self, code: str) -> str:
        """Run Python 3 code on the task's record and return what it printed.

        The record is preloaded as variables n, p, d, g, K, prefix and samples (and the dict record);
        numpy and the standard library can be imported. There is no network and no file of the host.

        Args:
            code: The Python source to run.
        """
        if self.sandbox is None or self.python.view is None:
            raise GF2ConfigError("run_python has no record: the tool server was not set up for a task.")
        return self.python.run_python(code)


class GF2Task(vf.Task[GF2Data, vf.State, GF2TaskConfig]):
    """One step: the prompt, gf2env's scorer as the reward, and the Python tool with ``tools``."""

    def score_reply(self, trace: vf.Trace) -> Score:
        """:func:`~gf2env.text.answers.score_answer` of the last assistant reply (none: ``no_answer``)."""
        replies = trace.assistant_messages
        text = (replies[-1].content or "") if replies else ""
        if not isinstance(text, str):  # content parts: their text, in order
            text = "".join(getattr(part, "text", "") or "" for part in text)
        return score_answer(text, self.data.target, self.data.p, self.data.answer_offset)

    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        """1.0 for the exact next term, else 0.0 (gf2env's scorer)."""
        return float(self.score_reply(trace).correct)

    @vf.metric
    async def failure(self, trace: vf.Trace) -> dict[str, float]:
        """The reply's failure class (``none`` when correct) as one 1.0 among the classes."""
        failure = self.score_reply(trace).failure.value
        return {f"failure_{name}": float(name == failure) for name in FAILURE_CLASSES}

    @classmethod
    def toolsets(cls, config: GF2TaskConfig) -> list[vf.Toolset]:
        return [GF2PythonToolset(config.python)] if config.tools else []


class GF2TasksetConfig(vf.TasksetConfig):
    """The records and the prompt (``--env.taskset.*``); the defaults are ``gf2 eval``'s."""

    p: int = 12
    d: int = 4
    K: int = 32
    sampling: str = "adversarial"
    depths: list[int] = Field(default_factory=lambda: list(DEPTH_LADDER))
    trials: int = 200
    seed: int = 0
    prompt: str = PAPER_PROMPT_ID
    """Prompt id (:data:`gf2env.text.prompt.PROMPT_IDS`)."""
    tools: bool = False
    """Serve ``run_python`` (:class:`GF2PythonToolset`) and describe it in the prompt."""
    task: GF2TaskConfig = GF2TaskConfig()

    @field_validator("prompt")
    @classmethod
    def _prompt(cls, value: str) -> str:
        return check_prompt_id(value, key="prompt")

    @field_validator("depths")
    @classmethod
    def _depths(cls, value: list[int]) -> list[int]:
        return list(check_depths(value, "depths"))

    @model_validator(mode="after")
    def _settings(self) -> GF2TasksetConfig:
        self.settings()  # gf2env's checks and messages
        if self.trials < 1:
            raise GF2ConfigError(f"trials={self.trials} is less than the minimum 1; pass trials >= 1.")
        self.tools = self.tools or self.task.tools  # either flag serves the tool; both then say so
        self.task = self.task.model_copy(update={"tools": self.tools})
        return self

    def settings(self) -> TaskSettings:
        return TaskSettings(p=self.p, d=self.d, K=self.K, sampling=self.sampling)


class GF2Taskset(vf.Taskset[GF2Task, GF2TasksetConfig]):
    """GF2Recon steps as verifiers tasks (see the module docs); ``len(depths) * trials`` of them."""

    def load(self) -> Any:
        config = self.config
        settings = config.settings()
        for g in config.depths:
            for trial in range(config.trials):
                record = generate_record(settings.at_depth(g), g, trial, config.seed)
                yield GF2Task(self.task_data(record, trial), config.task)

    def task_data(self, record: Record, trial: int) -> GF2Data:
        """The task data of ``record``: its prompt row, the tool's description added with ``tools``."""
        row = prompt_row(record, self.config.prompt)
        messages = row.pop("prompt")
        if self.config.tools:
            note = tool_call_instructions(row["answer_offset"], record.d - 1)
            messages[-1] = {**messages[-1], "content": f"{messages[-1]['content'].rstrip()}\n\n{note}"}
        config = self.config
        name = f"p{record.p}-d{record.d}-K{record.K}-{config.sampling}-seed{config.seed}-g{record.g}-t{trial}"
        return GF2Data(id=name, name=name, prompt=messages, trial=trial, **row)


class GF2Harness(NullHarness):
    """verifiers' ``null`` harness (a plain chat loop, no bash tool), the taskset's default."""


def load_environment(
    p: int = 12,
    d: int = 4,
    K: int = 32,
    depths: list[int] | tuple[int, ...] = DEPTH_LADDER,
    prompt: str = PAPER_PROMPT_ID,
    tools: bool = False,
    trials: int = 200,
    seed: int = 0,
    sampling: str = "adversarial",
    runtime: str = "subprocess",
    **agent: Any,
) -> vf.Env:
    """The ``gf2-recon`` environment through verifiers' own loader (``vf.load_environment``), its
    harness program running on this machine (``runtime``; verifiers' default is a Prime sandbox).
    ``agent`` adds to the agent's config (e.g. ``max_turns=12``)."""
    taskset = {"id": TASKSET_ID, "p": p, "d": d, "K": K, "depths": list(depths), "prompt": prompt,
               "tools": tools, "trials": trials, "seed": seed, "sampling": sampling}  # fmt: skip
    config = vf.resolve_env_config({"taskset": taskset, "agent": {"runtime": {"type": runtime}, **agent}})
    return vf.load_environment(config)


__all__ = [
    "GF2Data",
    "GF2Harness",
    "GF2PythonToolset",
    "GF2Task",
    "GF2TaskConfig",
    "GF2Taskset",
    "GF2TasksetConfig",
    "GF2ToolsetConfig",
    "TASKSET_ID",
    "load_environment",
    "tool_call_instructions",
]

# verifiers serves a rollout's tool: python -m gf2env.agents.integrations.verifiers
if __name__ == "__main__":
    GF2PythonToolset.run()

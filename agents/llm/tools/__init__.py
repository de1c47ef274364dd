"""Tool use: the model writes Python, the sandbox runs it on the record, the output comes back.

The room's modules, each one concept:

- :mod:`~gf2env.agents.llm.tools.record_globals`: the record's sandbox globals (``n``, ``p``, ``d``,
  ``g``, ``K``, ``prefix``, ``samples``, ``record``), described once and rendered for every door;
- :mod:`~gf2env.agents.llm.tools.paper`: the paper's rules, byte for byte (its instructions, first-block
  rule, feedback) and its budget (:data:`PAPER_MAX_REVISIONS`, :data:`PAPER_TOOL_CALLS`);
- :mod:`~gf2env.agents.llm.tools.protocol`: the protocol: messages, code extraction, run reports,
  :class:`ToolProtocol` (gf2env's) and :class:`PaperToolProtocol`;
- :mod:`~gf2env.agents.llm.tools.episode`: one step's conversation with its revisions
  (:class:`ToolEpisode`) and its final-answer precedence;
- :mod:`~gf2env.agents.llm.tools.runner`: many episodes played a turn at a time, batched on a backend
  (:func:`run_tool_episodes`);
- :mod:`~gf2env.agents.llm.tools.usage`: the tool-usage tables (gf2env's and the paper's CSV);
- :mod:`~gf2env.agents.llm.tools.workspaces`: episode mode, an instance walked through its depths in
  one workspace (:func:`chain_episodes`, :func:`run_episodes`);
- :mod:`~gf2env.agents.llm.tools.reuse`: what a step reuses of its workspace, and the reuse tables;
- :mod:`~gf2env.agents.llm.tools.session`: the text env's tool turns (:class:`SandboxTools`, the
  :class:`gf2env.envs.tool_turns.ToolTurns` of ``GF2ReconText-v1``);
- :mod:`~gf2env.agents.llm.tools.python_tool`: the budgeted ``run_python`` of the tool-calling doors
  (TRL's :mod:`gf2env.train.tool_env`, :mod:`gf2env.agents.integrations.verifiers`).
"""

from gf2env.agents.llm.tools.episode import OUTCOMES, TOOL_USE_CLASSES, ToolEpisode, start_episode
from gf2env.agents.llm.tools.paper import PAPER_MAX_REVISIONS, PAPER_TOOL_CALLS, PAPER_TOOL_PROTOCOL_ID
from gf2env.agents.llm.tools.protocol import (
    TOOL_PROMPT_ID,
    TOOL_PROTOCOLS,
    PaperToolProtocol,
    ToolProtocol,
    answer_form,
    run_report,
    tool_instructions,
    tool_protocol,
)
from gf2env.agents.llm.tools.python_tool import PythonTool
from gf2env.agents.llm.tools.record_globals import globals_list, globals_sentence, tool_view
from gf2env.agents.llm.tools.runner import run_jobs, run_tool_episodes
from gf2env.agents.llm.tools.session import SandboxTools, SandboxToolSession
from gf2env.agents.llm.tools.usage import (
    PAPER_TOOL_USAGE_COLUMNS,
    format_paper_tool_usage,
    format_tool_usage,
    paper_tool_usage,
    tool_usage,
    write_paper_tool_usage,
)
from gf2env.agents.llm.tools.workspaces import WORKSPACE_MODES, EpisodeChain, chain_episodes, run_episodes

__all__ = [
    "OUTCOMES",
    "PAPER_MAX_REVISIONS",
    "PAPER_TOOL_CALLS",
    "PAPER_TOOL_PROTOCOL_ID",
    "PAPER_TOOL_USAGE_COLUMNS",
    "TOOL_PROMPT_ID",
    "TOOL_PROTOCOLS",
    "TOOL_USE_CLASSES",
    "WORKSPACE_MODES",
    "EpisodeChain",
    "PaperToolProtocol",
    "PythonTool",
    "SandboxToolSession",
    "SandboxTools",
    "ToolEpisode",
    "ToolProtocol",
    "answer_form",
    "chain_episodes",
    "format_paper_tool_usage",
    "format_tool_usage",
    "globals_list",
    "globals_sentence",
    "paper_tool_usage",
    "run_episodes",
    "run_jobs",
    "run_report",
    "run_tool_episodes",
    "start_episode",
    "tool_instructions",
    "tool_protocol",
    "tool_usage",
    "tool_view",
    "write_paper_tool_usage",
]

"""LLM policies: an agent asks a backend its planned queries and keeps every answer in a resumable log.

The flow is one way: :mod:`~gf2env.agents.llm.agent` plans a cell's queries
(:mod:`~gf2env.agents.llm.planning`),
asks a backend (:mod:`~gf2env.agents.llm.openai_server`, :mod:`~gf2env.agents.llm.transformers_backend`,
:mod:`~gf2env.agents.llm.vllm_engine`, all on the types of :mod:`~gf2env.agents.llm.queries`) those not yet in
the log, and appends each answer to :mod:`~gf2env.agents.llm.query_log`; the room
:mod:`~gf2env.agents.llm.tools` runs tool episodes for it (tool use: its protocol, episodes, sessions).
The backends import their optional extras (httpx, transformers, vllm) only when used.
"""

from gf2env.agents.llm.agent import (
    LLM_BACKENDS,
    SERVED_BACKENDS,
    LLMAgent,
    LLMSpec,
    RunStats,
    VLLMServerPolicy,
)
from gf2env.agents.llm.openai_server import OpenAICompatibleBackend
from gf2env.agents.llm.planning import Planned, plan_queries, query_key
from gf2env.agents.llm.queries import APIS, Backend, Completion, Query, SamplingParams
from gf2env.agents.llm.query_log import QueryLog, entry_action, log_entry, log_rows
from gf2env.agents.llm.transformers_backend import TransformersBackend
from gf2env.agents.llm.vllm_engine import VLLMEngineBackend

__all__ = [
    "APIS",
    "LLM_BACKENDS",
    "SERVED_BACKENDS",
    "Backend",
    "Completion",
    "LLMAgent",
    "LLMSpec",
    "OpenAICompatibleBackend",
    "Planned",
    "Query",
    "QueryLog",
    "RunStats",
    "SamplingParams",
    "TransformersBackend",
    "VLLMEngineBackend",
    "VLLMServerPolicy",
    "entry_action",
    "log_entry",
    "log_rows",
    "plan_queries",
    "query_key",
]

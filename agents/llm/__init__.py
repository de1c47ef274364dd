"""LLM policies: an agent asks a backend its planned queries and keeps every answer in a resumable log.

The flow is one way: :mod:`~agents.llm.agent` plans a cell's queries (:mod:`~agents.llm.planning`),
asks a backend (:mod:`~agents.llm.openai_server`, :mod:`~agents.llm.transformers_backend`,
:mod:`~agents.llm.vllm_engine`, all on the types of :mod:`~agents.llm.queries`) those not yet in
the log, and appends each answer to :mod:`~agents.llm.query_log`; :mod:`~agents.llm.tool_mode` runs
tool episodes for it. The backends import their optional extras (httpx, transformers, vllm) only
when used.
"""

from agents.llm.agent import LLM_BACKENDS, SERVED_BACKENDS, LLMAgent, LLMSpec, RunStats, VLLMServerPolicy
from agents.llm.openai_server import OpenAICompatibleBackend
from agents.llm.planning import Planned, plan_queries, query_key
from agents.llm.queries import APIS, Backend, Completion, Query, SamplingParams
from agents.llm.query_log import QueryLog, entry_action, log_entry, log_rows
from agents.llm.transformers_backend import TransformersBackend
from agents.llm.vllm_engine import VLLMEngineBackend

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

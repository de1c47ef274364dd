"""reasoning-gym adapter: the ``gf2_recon`` procedural dataset (needs the ``reasoning-gym`` extra).

reasoning-gym 0.1.25 finds datasets only in its own registry, filled by ``register_dataset`` when a
module is imported (it has no entry points or plugin discovery), so importing this module registers
``gf2_recon``; from then on ``reasoning_gym.create_dataset("gf2_recon", ...)``, composite datasets,
``get_score_answer_fn`` and curriculum experiments find it by name::

    import reasoning_gym
    import gf2env.integrations.reasoning_gym  # registers gf2_recon

    data = reasoning_gym.create_dataset("gf2_recon", size=100, seed=0, p=12, depths=[0, 1, 3, 7])

Item ``i`` is a pure function of ``(seed, i)``: its depth ``g`` is
:func:`gf2env.records.record.mixed_depth` ``(seed, i, depths)`` and its record is
:func:`gf2env.records.record.generate_record` ``(config, g, i, seed)`` with ``n`` terms (``g + 1`` by
default): the record ``gf2 generate`` writes for depth ``g``, trial ``i`` (with the default ``n``,
also prompt ``i`` of the training stream, :func:`gf2env.train.data.prompt_stream`, with that seed).
The item is that record's :func:`gf2env.records.rows.prompt_row`: ``question`` is the user message
(a reasoning-gym item is one string; the prompt's system message, if any, is in
``metadata["system_prompt"]``), ``answer`` the correct ``\\boxed{[...]}`` in the prompt's
numbering, and ``score_answer`` is :func:`gf2env.text.answers.score_answer`: 1.0 for the exact next
term, else 0.0 (no partial credit).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

from gf2env.config.settings import DEPTH_LADDER, PER_DEPTH, TaskSettings, check_depths
from gf2env.errors import GF2ConfigError, MissingExtraError
from gf2env.records.record import generate_record, mixed_depth
from gf2env.records.rows import prompt_row
from gf2env.text.answers import boxed_answer, score_answer
from gf2env.text.prompt import COMPACT_V2_PROMPT_ID, check_prompt_id

try:
    from reasoning_gym.coaching import BaseCurriculum, ScalarAttributeDefinition
    from reasoning_gym.dataset import ProceduralDataset
    from reasoning_gym.factory import DATASETS, register_dataset
except ImportError as err:
    raise MissingExtraError(
        f"gf2env.integrations.reasoning_gym needs reasoning-gym: pip install -e '.[reasoning-gym]' ({err})."
    ) from None

DATASET_NAME = "gf2_recon"


@dataclass
class GF2ReconConfig:
    """The ``gf2_recon`` dataset: a task family (``p``, ``d``, ``K``, ``sampling``, ``w``), the depths its
    items mix, ``n`` terms an instance (an int, or ``"g+1"``), the prompt, and reasoning-gym's ``seed``
    (``None``: a random one) and ``size`` (the number of items an iteration yields)."""

    p: int = 12
    d: int = 4
    K: int = 32
    sampling: str = "adversarial"
    w: int | None = None
    depths: tuple[int, ...] = (0, 1, 3, 7)
    n: int | str = PER_DEPTH
    prompt_id: str = COMPACT_V2_PROMPT_ID
    seed: int | None = None
    size: int = 500

    def validate(self) -> None:
        """Raise :class:`~gf2env.errors.GF2ConfigError` naming the bad value and the fix (the task's
        checks are :class:`~gf2env.config.settings.TaskSettings`', the depths'
        :func:`~gf2env.config.settings.check_depths`,
        the prompt's :func:`~gf2env.text.prompt.check_prompt_id`)."""
        settings = self.settings()
        if self.n != PER_DEPTH:
            if isinstance(self.n, bool) or not isinstance(self.n, int):
                raise GF2ConfigError(
                    f"n={self.n!r} is neither a number of terms nor {PER_DEPTH!r}; pass e.g. n=32."
                )
            settings.config(self.n)
        check_depths(self.depths, "depths", below=self.n if isinstance(self.n, int) else None)
        check_prompt_id(self.prompt_id)
        if self.seed is not None and (
            isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0
        ):
            raise GF2ConfigError(
                f"seed={self.seed!r} is not an integer >= 0; pass e.g. seed=0 (None: a random seed)."
            )
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 1:
            raise GF2ConfigError(f"size={self.size!r} is not a positive number of items; pass e.g. size=500.")

    def settings(self) -> TaskSettings:
        """The task family (its checks raise for a bad ``p``, ``d``, ``K``, ``sampling`` or ``w``)."""
        return TaskSettings(p=self.p, d=self.d, K=self.K, sampling=self.sampling, w=self.w)


class GF2ReconDataset(ProceduralDataset):
    """Items of the GF(2) reconstruction step; item ``i`` is a pure function of ``(seed, i)``."""

    def __init__(self, config: GF2ReconConfig):
        super().__init__(config=config, seed=config.seed, size=config.size)
        self.depths = check_depths(config.depths, "depths")
        self.settings = config.settings()

    def __getitem__(self, idx: int) -> dict[str, Any]:
        """Item ``idx``: any index >= 0 (``size`` bounds iteration only, as in reasoning-gym's datasets)."""
        index = operator.index(idx)
        if index < 0:
            raise IndexError(f"gf2_recon item {idx} does not exist; items are numbered from 0.")
        config: GF2ReconConfig = self.config
        g = mixed_depth(self.seed, index, self.depths)
        n = g + 1 if config.n == PER_DEPTH else int(config.n)
        record = generate_record(self.settings.config(n), g, index, self.seed)
        row = prompt_row(record, config.prompt_id)
        messages = row["prompt"]
        system = "".join(m["content"] for m in messages if m["role"] == "system")
        return {
            "question": messages[-1]["content"],
            "answer": boxed_answer(row["target"], row["answer_offset"]),
            "metadata": {
                "source_dataset": DATASET_NAME,
                "source_index": index,
                "target": row["target"],
                "p": row["p"],
                "answer_offset": row["answer_offset"],
                "g": row["g"],
                "record": row["record"],
                "prompt_id": config.prompt_id,
                "system_prompt": system,
                "seed": self.seed,
                "setting": {
                    "p": config.p,
                    "d": config.d,
                    "K": config.K,
                    "sampling": config.sampling,
                    "w": config.w,
                    "n": config.n,
                },
                "difficulty": {"g": g},
            },
        }

    def score_answer(self, answer: str | None, entry: dict[str, Any]) -> float:
        """1.0 when gf2env's scorer finds the exact next term in ``answer``, else 0.0 (no partial credit).

        ``answer`` is graded as ``gf2 eval`` grades a reply: the final ``\\boxed{[...]}`` (or answer
        line) outside reasoning, hedges wrong; a bare list such as ``[13, 14, 16]`` is not an answer."""
        if not isinstance(answer, str):
            return 0.0
        meta = entry["metadata"]
        return float(score_answer(answer, meta["target"], meta["p"], meta["answer_offset"]).correct)


class GF2ReconCurriculum(BaseCurriculum):
    """Curriculum over depth: level ``k`` mixes the first ``k + 1`` rungs of :data:`DEPTH_LADDER`."""

    def __init__(self) -> None:
        super().__init__(GF2ReconCurriculum.__name__, GF2ReconConfig)
        self._define_attributes(
            ScalarAttributeDefinition(
                name="depths",
                field_name="depths",
                levels=[DEPTH_LADDER[: k + 1] for k in range(len(DEPTH_LADDER))],
                default_level=0,
                description="the depths the items mix",
            )
        )


if DATASET_NAME not in DATASETS:  # registered once a process (re-importing must not raise)
    register_dataset(DATASET_NAME, GF2ReconDataset, GF2ReconConfig, GF2ReconCurriculum)

__all__ = ["DATASET_NAME", "DEPTH_LADDER", "GF2ReconConfig", "GF2ReconCurriculum", "GF2ReconDataset"]

"""The ``gf2_recon`` reasoning-gym dataset, used through reasoning-gym's own entry points.

Items come from ``reasoning_gym.create_dataset`` (and composite / curriculum datasets built by name),
and are checked against the records and rows gf2env makes for the documented ``(seed, g, i)``.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from gf2env.config.settings import TaskSettings
from gf2env.errors import GF2ConfigError
from gf2env.records.record import generate_record
from gf2env.records.rows import prompt_row
from gf2env.text.answers import score_answer
from tests.extras import require_extra
from tests.paths import REPO

rg = require_extra("reasoning_gym", "reasoning-gym")
rgym = importlib.import_module("gf2env.integrations.reasoning_gym")  # registers gf2_recon


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def test_items_are_the_rows_of_the_documented_records() -> None:
    kwargs = dict(p=8, d=3, K=16, sampling="diagnostic", depths=[0, 2, 5], n=8, prompt_id="plain-v1")
    data = rg.create_dataset("gf2_recon", size=6, seed=3, **kwargs)
    items = list(data)
    assert len(data) == 6 and len(items) == 6
    settings = TaskSettings(p=8, d=3, K=16, sampling="diagnostic")
    depths_seen = set()
    for i, item in enumerate(items):
        g = [0, 2, 5][int(np.random.default_rng([3, i]).integers(3))]  # the documented depth of item i
        record = generate_record(settings.config(8), g, i, 3)
        row = prompt_row(record, "plain-v1")
        meta = item["metadata"]
        assert item["question"] == row["prompt"][-1]["content"]
        assert meta["system_prompt"] == row["prompt"][0]["content"] and row["prompt"][0]["role"] == "system"
        assert (meta["g"], meta["target"], meta["p"], meta["answer_offset"]) == (
            g, row["target"], 8, 8,
        )  # fmt: skip
        assert json.loads(meta["record"]) == record.to_json()
        assert item["answer"] == "\\boxed{[" + ", ".join(str(t + 8) for t in record.target) + "]}"
        assert meta["source_dataset"] == "gf2_recon" and meta["source_index"] == i
        assert meta["setting"] == {"p": 8, "d": 3, "K": 16, "sampling": "diagnostic", "w": None, "n": 8}
        assert meta["difficulty"] == {"g": g} and meta["seed"] == 3 and meta["prompt_id"] == "plain-v1"
        assert data[i] == item  # random access is the iteration's item
        depths_seen.add(g)
    assert len(depths_seen) > 1
    json.dumps(items)  # reasoning-gym's tools write items as JSON


def test_default_items_have_g_plus_one_terms_and_the_compact_v2_prompt() -> None:
    data = rg.create_dataset("gf2_recon", size=4, seed=0)
    for i, item in enumerate(data):
        g = item["metadata"]["g"]
        assert g in (0, 1, 3, 7)
        record = generate_record(TaskSettings().at_depth(g), g, i, 0)
        assert json.loads(item["metadata"]["record"])["n"] == g + 1
        assert item["question"] == prompt_row(record, "compact-v2")["prompt"][-1]["content"]
        assert item["metadata"]["answer_offset"] == 0


def test_items_are_per_index_deterministic() -> None:
    a = list(rg.create_dataset("gf2_recon", size=5, seed=11, p=10))
    b = list(rg.create_dataset("gf2_recon", size=5, seed=11, p=10))
    longer = list(rg.create_dataset("gf2_recon", size=9, seed=11, p=10))
    other = list(rg.create_dataset("gf2_recon", size=5, seed=12, p=10))
    assert a == b
    assert longer[:5] == a  # item i does not depend on the size
    assert all(x["question"] != y["question"] for x, y in zip(a, other, strict=True))
    with pytest.raises(IndexError, match="numbered from 0"):
        rg.create_dataset("gf2_recon", size=5, seed=11)[-1]


def test_reasoning_gyms_endless_wrapper_reseeds_chunk_by_chunk() -> None:
    from reasoning_gym.dataset import ReseedingDataset

    data = rg.create_dataset("gf2_recon", size=3, seed=40, p=8, d=3)
    endless = iter(ReseedingDataset(data, chunk_size=2))
    items = [next(endless) for _ in range(5)]
    assert items[:2] == [data[0], data[1]]
    assert items[2:4] == list(rg.create_dataset("gf2_recon", size=2, seed=41, p=8, d=3))
    assert items[4]["metadata"]["seed"] == 42 and endless.score_answer(items[4]["answer"], items[4]) == 1.0


def test_a_dataset_without_a_seed_draws_one_and_records_it() -> None:
    data = rg.create_dataset("gf2_recon", size=2)
    item = data[1]
    assert item["metadata"]["seed"] == data.seed
    assert item == rg.create_dataset("gf2_recon", size=2, seed=data.seed)[1]


def test_the_items_are_the_training_prompts_of_the_same_seed() -> None:
    from gf2env.train.curriculum import FixedCurriculum
    from gf2env.train.data import TaskSpec, prompt_stream

    data = rg.create_dataset("gf2_recon", size=4, seed=5, depths=[0, 3], prompt_id="compact-v1")
    stream = prompt_stream(TaskSpec(prompt_id="compact-v1"), FixedCurriculum([(0, [0, 3])]), seed=5)
    for item in data:
        row = next(stream)
        assert item["question"] == row["prompt"][-1]["content"] and item["metadata"]["g"] == row["g"]


def _replies(item: dict) -> list[str]:
    target = [t + item["metadata"]["answer_offset"] for t in item["metadata"]["target"]]
    wrong = [t + 1 for t in target]
    listed = ", ".join(map(str, target))
    return [
        item["answer"],
        f"<think>the residuals...</think>\nSo the term is \\boxed{{[{listed}]}}.",
        f"\\boxed{{[{', '.join(map(str, reversed(target)))}]}}",
        f"Answer: [{listed}]",
        f"\\boxed{{[{', '.join(map(str, wrong))}]}}",
        f"\\boxed{{[{listed}]}} or maybe \\boxed{{[{', '.join(map(str, wrong))}]}}",  # hedged
        f"[{listed}]",  # a bare list is not an answer
        f"<think>\\boxed{{[{listed}]}}</think> I am not sure.",
        f"\\boxed{{[{listed}, {target[0]}]}}",
        "\\boxed{[i1, i2, i3]}",
        "",
    ]


@pytest.mark.parametrize("prompt_id", ["compact-v2", "paper"])
def test_score_answer_is_gf2envs_scorer(prompt_id: str) -> None:
    data = rg.create_dataset("gf2_recon", size=3, seed=2, prompt_id=prompt_id, n=32, depths=[0, 7])
    scores = []
    for item in data:
        meta = item["metadata"]
        assert data.score_answer(item["answer"], item) == 1.0
        for reply in _replies(item):
            graded = score_answer(reply, meta["target"], meta["p"], meta["answer_offset"])
            score = data.score_answer(reply, item)
            assert score == float(graded.correct)
            scores.append(score)
        assert data.score_answer(None, item) == 0.0
    assert scores.count(1.0) == 3 * 4 and scores.count(0.0) == 3 * 7  # exact: no partial credit
    assert rg.get_score_answer_fn("gf2_recon")(data[0]["answer"], data[0]) == 1.0


def test_the_paper_prompts_own_answer_form_scores() -> None:
    item = rg.create_dataset("gf2_recon", size=1, seed=4, prompt_id="paper", n=32, depths=[1])[0]
    assert item["metadata"]["answer_offset"] == 32 and item["metadata"]["system_prompt"] == ""
    paper_form = "\\boxed[" + ", ".join("{" + str(t + 32) + "}" for t in item["metadata"]["target"]) + "]"
    assert rg.create_dataset("gf2_recon", size=1).score_answer(paper_form, item) == 1.0


def test_reasoning_gyms_answer_tags_carry_the_box() -> None:
    """reasoning-gym's evaluation asks for ``<answer>...</answer>`` and scores what
    ``reasoning_gym.utils.extract_answer`` takes out of the tags."""
    from reasoning_gym.utils import SYSTEM_PROMPTS, extract_answer

    assert "<answer>" in SYSTEM_PROMPTS["default"]
    data = rg.create_dataset("gf2_recon", size=1, seed=9)
    item = data[0]
    boxed = item["answer"]
    bare = boxed.removeprefix("\\boxed{").removesuffix("}")
    assert data.score_answer(extract_answer(f"<think>...</think>\n<answer>{boxed}</answer>"), item) == 1.0
    assert data.score_answer(extract_answer(f"<answer>{bare}</answer>"), item) == 0.0  # the box is needed
    assert data.score_answer(extract_answer("no tags at all"), item) == 0.0  # extract_answer gives None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"p": 70}, "p=70 exceeds the maximum 64.*Pass p <= 64"),
        ({"d": 1}, "d=1 is less than the minimum 2.*Pass d >= 2"),
        ({"K": 0}, "K=0 .*pass K >= 1"),
        ({"sampling": "random"}, "sampling='random' is not a sampling mode; pass one of"),
        ({"depths": [0, 40], "n": 32}, "only n=32 terms; pass depths below 32"),
        ({"depths": []}, r"depths=\[\] must be a non-empty list"),
        ({"depths": [-1]}, "integer depths >= 0"),
        ({"n": "g+2"}, "n='g\\+2' is neither a number of terms nor 'g\\+1'; pass e.g. n=32"),
        ({"n": 0}, "n=0 is less than the minimum 1"),
        ({"prompt_id": "paper-v1"}, "renamed 'plain-v1'"),
        ({"prompt_id": "nope"}, "prompt_id='nope' is unknown; pass one of"),
        ({"seed": -1}, "seed=-1 is not an integer >= 0; pass e.g. seed=0"),
        ({"size": 0}, "size=0 is not a positive number of items; pass e.g. size=500"),
    ],
)
def test_a_bad_config_raises_naming_the_fix(kwargs: dict, message: str) -> None:
    with pytest.raises(GF2ConfigError, match=message):
        rg.create_dataset("gf2_recon", **kwargs)


def test_a_composite_dataset_from_yaml_finds_gf2_recon(tmp_path) -> None:
    from reasoning_gym.composite import CompositeConfig, CompositeDataset

    spec = tmp_path / "mix.yaml"
    spec.write_text(
        "size: 12\nseed: 1\ndatasets:\n"
        "  - name: gf2_recon\n    weight: 1\n    config: {p: 8, d: 3, depths: [0, 1]}\n"
        "  - name: chain_sum\n    weight: 1\n    config: {}\n"
    )
    composite = CompositeDataset(CompositeConfig.from_yaml(str(spec)))
    sources = [item["metadata"]["source_dataset"] for item in composite]
    assert set(sources) == {"gf2_recon", "chain_sum"}
    for item in composite:
        assert composite.score_answer(item["answer"], item) == 1.0
        if item["metadata"]["source_dataset"] == "gf2_recon":
            assert composite.score_answer("[0, 1]", item) == 0.0


def test_a_curriculum_experiment_moves_through_the_depth_ladder() -> None:
    from reasoning_gym.coaching.curriculum_config import CurriculumAttributeConfig, CurriculumExperimentConfig
    from reasoning_gym.coaching.experiment import CurriculumExperiment

    config = CurriculumExperimentConfig(curricula={"gf2_recon": CurriculumAttributeConfig({"depths": 1})})
    experiment = CurriculumExperiment("gf2", config, size=6, seed=0)
    items = [experiment.get_dataset_entry(i) for i in range(6)]
    assert {item["metadata"]["g"] for item in items} <= {0, 1}
    for item in items:
        assert experiment.score_answer_with_id(item["answer"], item["metadata"]["entry_id"]) == 1.0
    experiment.update_difficulty("gf2_recon", "increment")
    assert tuple(experiment.composite.datasets["gf2_recon"].config.depths) == (0, 1, 3)
    assert rgym.DEPTH_LADDER == (0, 1, 3, 7, 15, 31)


def test_registration_happens_on_import_only() -> None:
    code = (
        "import reasoning_gym\n"
        "try:\n    reasoning_gym.create_dataset('gf2_recon', size=1)\n"
        "except ValueError as err:\n    print('before:', err)\n"
        "import importlib, gf2env.integrations.reasoning_gym as m\n"
        "importlib.reload(m)\n"  # importing again must not raise 'already registered'
        "item = reasoning_gym.create_dataset('gf2_recon', size=1, seed=0)[0]\n"
        "print('after:', item['metadata']['source_dataset'])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "before: Dataset 'gf2_recon' not registered" in out.stdout
    assert "after: gf2_recon" in out.stdout


def test_without_reasoning_gym_the_import_names_the_extra() -> None:
    code = "import sys; sys.modules['reasoning_gym'] = None\nimport gf2env.integrations.reasoning_gym\n"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=120
    )
    assert out.returncode == 1
    assert "MissingExtraError" in out.stderr and "pip install -e '.[reasoning-gym]'" in out.stderr


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("uvicorn") is None or importlib.util.find_spec("fastapi") is None,
    reason="transformers serve needs transformers[serving] (make test installs it)",
)
def test_reasoning_gyms_eval_loop_against_a_real_model(tmp_path, smollm2) -> None:
    """What reasoning-gym's evaluation does with a dataset: each question as the user message after its
    default system prompt to an OpenAI-compatible server, ``extract_answer`` on the reply, then
    ``score_answer``; here through a curriculum experiment, whose score board groups the scores by g."""
    import urllib.request

    from reasoning_gym.coaching.curriculum_config import CurriculumAttributeConfig, CurriculumExperimentConfig
    from reasoning_gym.coaching.experiment import CurriculumExperiment
    from reasoning_gym.utils import SYSTEM_PROMPTS, extract_answer

    from tests.servers import start_transformers_server

    config = CurriculumExperimentConfig(curricula={"gf2_recon": CurriculumAttributeConfig({"depths": 1})})
    experiment = CurriculumExperiment("gf2", config, size=3, seed=0)
    experiment.composite.update_dataset_config("gf2_recon", {"p": 6, "d": 3, "K": 8, "seed": 0})
    with start_transformers_server(smollm2, log_path=tmp_path / "serve.log") as server:
        replies = []
        for i in range(3):
            entry = experiment.get_dataset_entry(i)
            messages = [
                {"role": "system", "content": SYSTEM_PROMPTS["default"]},
                {"role": "user", "content": entry["question"]},
            ]
            body = {"model": server.model, "messages": messages, "max_tokens": 48, "temperature": 0.0}
            req = urllib.request.Request(
                server.base_url + "/v1/chat/completions", json.dumps(body).encode(),
                {"Content-Type": "application/json"},
            )  # fmt: skip
            with urllib.request.urlopen(req, timeout=120) as resp:
                assert resp.status == 200
                reply = json.load(resp)["choices"][0]["message"]["content"]
            answer = extract_answer(reply)
            score = experiment.score_answer_with_id(answer, entry["metadata"]["entry_id"])
            meta = entry["metadata"]
            expected = (
                answer is not None and score_answer(answer, meta["target"], 6, meta["answer_offset"]).correct
            )
            assert score == float(expected)
            replies.append((meta["g"], reply, score))
    print(replies)  # what the model wrote, for the record
    groups = experiment.score_board.aggregate()["gf2_recon"]
    assert groups.total_scores == 3
    by_g = {dict(key)["g"]: values for key, values in groups.scores.items()}
    assert sorted(g for g, values in by_g.items() for _ in values) == sorted(g for g, _, _ in replies)

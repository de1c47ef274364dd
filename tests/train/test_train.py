"""TRL loops on CPU: GRPO with the γ_g callback, resume, SFT, LoRA, tool mode, rewards.

The loops that users run on a real model run here on one: SmolLM2-135M-Instruct (``make models``)
for LoRA GRPO, SFT and tool-mode GRPO. The GRPO step/resume bookkeeping test keeps the 1.3 MB random
tiny model: it takes several runs of the trainer, and only counts steps, rows and checkpoints.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")

from gf2env.errors import GF2ConfigError  # noqa: E402
from gf2env.text.answers import extract_answer, validate_answer  # noqa: E402
from gf2env.train.config import load_train_config  # noqa: E402
from gf2env.train.curriculum import AdaptiveCurriculum, FixedCurriculum, make_curriculum  # noqa: E402
from gf2env.train.data import TaskSpec, prompt_stream  # noqa: E402
from gf2env.train.gamma_log import read_gamma_csv  # noqa: E402
from gf2env.train.rewards import correct_term_reward, format_reward  # noqa: E402
from gf2env.train.tiny_lm import build_tiny_model  # noqa: E402
from tests.paths import REPO as ROOT

SMOKE = ROOT / "configs" / "train/grpo/smoke.yaml"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny"))


def train(loop: str, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "gf2env", "train", loop, *args]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-4000:]
    return run


# target [1, 2] at p=6 (payload indices); the compact prompt's offset is 0, the paper's is n.
REWARD_TABLE = [
    ("\\boxed{[1, 2]}", 0, 1.0, 1.0),
    ("<think>\\boxed{[1, 2]}</think> so \\boxed{[2, 1]}", 0, 1.0, 1.0),
    ("<think>\\boxed{[1, 2]}</think> no answer here", 0, 0.0, 0.0),
    ("\\boxed{[1, 3]}", 0, 0.0, 1.0),  # well-formed, wrong
    ("\\boxed{[1, 2]} or maybe \\boxed{[3, 4]}", 0, 0.0, 0.0),  # hedging
    ("\\boxed{[1, 1]}", 0, 0.0, 0.0),  # duplicate
    ("\\boxed{[1, 9]}", 0, 0.0, 0.0),  # out of range
    ("\\boxed{[5, 6]}", 4, 1.0, 1.0),  # the paper's numbering, n = 4
    ("\\boxed{[1, 2]}", 4, 0.0, 0.0),  # ... where 1 and 2 are address variables
    ("Answer: [1, 2]", 0, 1.0, 1.0),  # lenient
]


@pytest.mark.parametrize(("text", "offset", "correct", "formatted"), REWARD_TABLE)
def test_rewards_agree_with_the_validator(text, offset, correct, formatted):
    kwargs = {"target": [[1, 2]], "p": [6], "answer_offset": [offset]}
    assert correct_term_reward([text], **kwargs) == [correct]
    assert format_reward([text], **kwargs) == [formatted]
    conversational = [[{"role": "assistant", "content": text}]]
    assert correct_term_reward(conversational, **kwargs) == [correct]
    # The validator on the extracted final answer says the same (hedged or missing answers: no verdict).
    ex = extract_answer(text)
    answer = "[" + ", ".join(ex.items or ()) + "]"
    verdict = ex.failure is None and validate_answer(answer, [1, 2], 6, offset=offset).correct
    assert verdict == bool(correct)


def test_curricula():
    fixed = FixedCurriculum(stages=[(0, [0]), (5, [0, 1])])
    assert fixed.depths() == (0,)
    fixed.advance(5)
    assert fixed.depths() == (0, 1)
    adaptive = AdaptiveCurriculum(ladder=[0, 1, 3], threshold=0.5)
    assert not adaptive.observe(10, {0: 0.4}) and adaptive.depths() == (0,)
    assert adaptive.observe(20, {0: 0.6}) and adaptive.depths() == (0, 1)
    again = AdaptiveCurriculum(ladder=[0, 1, 3])
    again.load_state(adaptive.state())
    assert again.depths() == (0, 1) and again.moves == [(20, 1)]
    with pytest.raises(GF2ConfigError, match="must increase"):
        make_curriculum({"kind": "adaptive", "ladder": [3, 1]})
    with pytest.raises(GF2ConfigError, match="first must be 0"):
        make_curriculum({"stages": [[2, [0]]]})


def test_prompt_stream_follows_the_curriculum_and_is_reproducible():
    curriculum = FixedCurriculum(stages=[(0, [0, 1])])
    task = TaskSpec(p=6, d=3, K=8)
    first = [row for _, row in zip(range(6), prompt_stream(task, curriculum, seed=3), strict=False)]
    again = [row for _, row in zip(range(6), prompt_stream(task, curriculum, seed=3), strict=False)]
    assert first == again and {r["g"] for r in first} <= {0, 1}
    assert all("target" not in r["prompt"][-1]["content"] for r in first)
    curriculum.advance(1)
    curriculum.stages = [(0, [2])]
    assert {r["g"] for _, r in zip(range(4), prompt_stream(task, curriculum, seed=3), strict=False)} == {2}


def test_config_errors_name_the_fix(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: {path: x}\ngamma: {evry: 3}\n")
    with pytest.raises(GF2ConfigError, match=r"gamma has unknown keys \['evry'\]"):
        load_train_config(bad)
    bad.write_text("model: {path: x}\nseed: 5\ngamma: {eval_seed: 5}\n")
    with pytest.raises(GF2ConfigError, match="held-out records would be the training ones"):
        load_train_config(bad)


@pytest.mark.parametrize(
    ("yaml", "key"),
    [
        ("sft: {tools: 'no'}", "tools='no'"),
        ("tools: 'false'", "tools='false'"),
        ("sft: {tools: 0}", "tools=0"),
    ],
)
def test_config_booleans_are_real_booleans(tmp_path, yaml, key):
    # bool('no') is True: a quoted or numeric boolean, in a section or at the top, is refused.
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"model: {{path: x}}\n{yaml}\n")
    with pytest.raises(GF2ConfigError, match=f"{key} is not a boolean; write tools: true or tools: false"):
        load_train_config(bad)
    bad.write_text("model: {path: x}\nsft: {tools: true}\ntools: false\n")
    config = load_train_config(bad)
    assert config.sft.tools is True and config.tools is False


@pytest.mark.slow
def test_grpo_three_steps_write_gamma_rows_and_resume_continues(tiny, tmp_path):
    out = tmp_path / "grpo"
    train("grpo", "--config", str(SMOKE), "--model-path", str(tiny), "--output-dir", str(out))
    rows = read_gamma_csv(out / "gamma.csv")
    # evaluations at the start, every 2 steps and at the end: steps 0, 2, 3; one row per (step, depth)
    assert sorted((r["step"], r["g"]) for r in rows) == [(s, g) for s in (0, 2, 3) for g in (0, 1)]
    assert all(0 <= r["gamma_lo"] <= r["gamma_mean"] <= r["gamma_hi"] <= 1 and r["trials"] == 4 for r in rows)
    assert {r["eval_seed"] for r in rows} == {1_000_003} and {
        r["active_depths"] for r in rows if r["step"] == 3
    } == {"0 1"}
    assert (out / "gamma_vs_step.png").stat().st_size > 0 and (out / "gamma_vs_depth.png").stat().st_size > 0
    assert "0,fixed,0\n2,fixed,0 1\n" in (out / "curriculum.csv").read_text()
    assert json.loads((out / "checkpoint-2" / "curriculum.json").read_text())["step"] == 2
    # Resume from the last checkpoint (step 3) and train to step 5: the step count and the γ log continue.
    train("grpo", "--config", str(SMOKE), "--model-path", str(tiny), "--output-dir", str(out), "--resume",
          "--max-steps", "5")  # fmt: skip
    state = json.loads((out / "checkpoint-5" / "trainer_state.json").read_text())
    assert state["global_step"] == 5
    steps = [r["step"] for r in read_gamma_csv(out / "gamma.csv")]
    assert sorted(set(steps)) == [0, 2, 3, 4, 5] and all(steps.count(s) == 2 for s in set(steps))


@pytest.mark.slow
def test_sft_with_lora_on_teacher_traces_lowers_the_loss(smollm2, tmp_path):
    import dataclasses

    from gf2env.train.config import load_train_config
    from gf2env.train.sft import build_trainer, teacher_rows

    rows = teacher_rows(TaskSpec(p=6, d=3, K=8), (0, 1), 10, seed=0, tools=False)
    assert len(rows) == 20 and sum(r["teacher_correct"] for r in rows) >= 18  # A: right unless ambiguous
    assert (
        rows[0]["completion"][0]["content"].endswith("]}")
        and "\\boxed{[" in rows[0]["completion"][0]["content"]
    )
    tool_rows = teacher_rows(TaskSpec(p=6, d=3, K=8), (1,), 2, seed=0, tools=True)
    assert tool_rows[0]["completion"][0]["content"].startswith("```python\n")
    config = load_train_config(
        ROOT / "configs" / "train/sft/smoke.yaml", model_path=smollm2, output_dir=tmp_path
    )
    config.model = dataclasses.replace(config.model, lora={"r": 8, "lora_alpha": 16})
    config.trainer["max_steps"] = 8
    trainer = build_trainer(config)
    trainer.train()
    losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    assert len(losses) == 8 and losses[-1] < losses[0] * 0.9, losses
    assert {r["step"] for r in read_gamma_csv(tmp_path / "gamma.csv")} == {0, 3, 6, 8}


@pytest.mark.slow
def test_tool_mode_grpo_runs_with_the_sandbox_environment(tmp_path, smollm2):
    from gf2env.agents.sandbox import detect_isolation

    if not detect_isolation().get("bwrap"):
        pytest.skip("bubblewrap cannot run here (apt-get install -y bubblewrap)")
    import shutil

    from transformers import AutoTokenizer
    from trl.chat_template_utils import qwen3_chat_template

    model = tmp_path / "smollm2-tools"
    shutil.copytree(smollm2, model)
    tokenizer = AutoTokenizer.from_pretrained(model)
    tokenizer.chat_template = qwen3_chat_template  # a template TRL knows how to parse tool calls from
    tokenizer.save_pretrained(model)
    config = tmp_path / "tools.yaml"
    config.write_text(
        f"model: {{path: {model}}}\ntask: {{p: 6, d: 3, K: 8, prompt_id: compact-v1}}\ntools: true\n"
        "gamma: {depths: [0], trials: 2, every: 5, max_tokens: 16}\n"
        "trainer: {max_steps: 2, per_device_train_batch_size: 2, num_generations: 2,\n"
        "          max_completion_length: 24}\n"
        f"output_dir: {tmp_path / 'out'}\n"
    )
    run = train("grpo", "--config", str(config))
    logs = run.stdout + run.stderr  # TRL's per-step logs: the tool calls and the environment's reward
    assert "'rewards/tool_calls/mean'" in logs and "'rewards/GF2ToolEnvironment/mean'" in logs
    assert "'tools/call_frequency'" in logs and (tmp_path / "out" / "gamma.csv").exists()


def test_every_training_preset_loads_and_names_real_trl_options():
    import dataclasses

    from trl import GRPOConfig, SFTConfig

    presets = sorted([*(ROOT / "configs" / "train" / "grpo").glob("*.yaml"),
                      *(ROOT / "configs" / "train" / "sft").glob("*.yaml")])  # fmt: skip
    names = {
        "grpo/smoke",
        "sft/smoke",
        "sft/cpu-demo",
        "grpo/cpu-demo",
        "grpo/qwen3-4b-lora",
        "grpo/qwen3-4b-full",
    }
    assert {f"{p.parent.name}/{p.stem}" for p in presets} >= names
    for path in presets:
        config = load_train_config(path)
        options = {f.name for f in dataclasses.fields(SFTConfig if path.parent.name == "sft" else GRPOConfig)}
        assert set(config.trainer) <= options, (path.name, set(config.trainer) - options)


@pytest.mark.slow
def test_grpo_with_lora_trains_only_the_adapter(smollm2, tmp_path):
    config = tmp_path / "lora.yaml"
    lora = "model: {path: results/tiny-lm, lora: {r: 4, lora_alpha: 8}}"
    config.write_text(
        SMOKE.read_text()
        .replace("model: {path: results/tiny-lm}", lora)
        .replace("max_steps: 3", "max_steps: 2")
    )
    train("grpo", "--config", str(config), "--model-path", smollm2, "--output-dir", str(tmp_path / "out"))
    saved = tmp_path / "out" / "final"
    assert (saved / "adapter_config.json").exists() and (saved / "adapter_model.safetensors").exists()
    assert json.loads((saved / "adapter_config.json").read_text())["r"] == 4


def test_one_training_run_at_a_time_holds_the_gamma_query_log(tmp_path):
    from gf2env.train.gamma import GammaCallback
    from gf2env.train.gamma_log import GammaEvalSpec

    def callback() -> GammaCallback:
        return GammaCallback(GammaEvalSpec(), TaskSpec(p=6, d=3, K=8), tmp_path, tokenizer=None)

    refused = rf"{tmp_path} is in use by another run: .*gamma_queries\.jsonl.*pass another --output-dir"
    # Another process holds the folder (its callback built, training under way).
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom gf2env.train.gamma import GammaCallback\n"
         "from gf2env.train.gamma_log import GammaEvalSpec\nfrom gf2env.train.data import TaskSpec\n"
         f"held = GammaCallback(GammaEvalSpec(), TaskSpec(p=6, d=3, K=8), {str(tmp_path)!r}, None)\n"
         "print('held', flush=True)\ntime.sleep(60)"],
        stdout=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(GF2ConfigError, match=refused):
            callback()
    finally:
        holder.kill()
        holder.wait()
    first = callback()  # the holder gone, the folder is free
    with pytest.raises(GF2ConfigError, match=refused):  # a second open, in this process too
        callback()
    first.close()  # what the end of training does
    callback().close()

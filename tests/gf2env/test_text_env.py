"""GF2ReconText-v1: prompt in, raw model text out, graded by the task's scorer."""

from __future__ import annotations

import gymnasium as gym
import pytest

import gf2env  # noqa: F401  (registers the envs)
from gf2env.errors import GF2ConfigError, InvalidActionError
from gf2env.text.prompt import PROMPT_IDS


def boxed(indices, offset: int) -> str:
    answer = ", ".join(str(i + offset) for i in indices)
    return f"<think>maybe \\boxed{{[0, 1, 2]}}</think> so the term is \\boxed{{[{answer}]}}"


@pytest.mark.parametrize("prompt_id", PROMPT_IDS)
def test_correct_text_answers_score_and_history_is_kept(prompt_id):
    env = gym.make("GF2ReconText-v1", n=4, prompt_id=prompt_id)
    prompt, info = env.reset(seed=0)
    assert isinstance(prompt, str) and info["messages"][-1] == {"role": "user", "content": prompt}
    inner = env.unwrapped
    total = 0.0
    for g in range(4):
        target = inner.instance.term(g)
        prompt, reward, terminated, _, info = env.step(boxed(target, info["answer_offset"]))
        total += reward
        assert info["score"]["correct"] and info["correct"]
    assert terminated and prompt == "" and total == 4.0
    assert [turn["depth"] for turn in env.get_wrapper_attr("history")] == [0, 1, 2, 3]


def test_malformed_and_wrong_answers_are_wrong_steps_with_their_failure():
    env = gym.make("GF2ReconText-v1", n=6)
    _, info = env.reset(seed=1)
    _, reward, terminated, _, info = env.step("I do not know")
    assert reward == 0.0 and not terminated and info["score"]["failure"] == "no_answer"
    _, reward, _, _, info = env.step("\\boxed{[1, 2, 3]}")  # payload indices without the offset n=6
    assert reward == 0.0 and info["score"]["failure"] == "out_of_range"
    assert info["depth"] == 1 and not info["correct"]


def test_terminate_mode_ends_on_a_malformed_answer():
    env = gym.make("GF2ReconText-v1", n=6, step_mode="terminate")
    env.reset(seed=2)
    *_, terminated, _, info = env.step("\\boxed{[6, 6, 7]}")
    assert terminated and info["score"]["failure"] == "duplicate"


def test_bad_arguments():
    with pytest.raises(GF2ConfigError, match="prompt_id"):
        gym.make("GF2ReconText-v1", prompt_id="nope")
    env = gym.make("GF2ReconText-v1", n=3)
    env.reset(seed=0)
    with pytest.raises(InvalidActionError, match="str"):
        env.step(3)
